//! Checkpoints ([`crate::Db::checkpoint`]): a consistent, openable copy of
//! a live database in another directory, taken without stopping writers
//! (`docs/DESIGN.md` §1.5.2, crash safety §5.14). A backup
//! (`crate::backup`) stores the same files, from the same
//! [`CheckpointSource`].
//!
//! # What the copy is
//!
//! The database as it was at one sequence `S`: every logged batch up to
//! `S`, none after it — what recovery of the source would give if the
//! process stopped right then, cut at a batch boundary. Three parts make
//! it, all taken in one critical section under the state lock and then the
//! WAL lock (the order rotation takes them, §6), so that no flush, rotation
//! or append lands between them:
//!
//! * the **version** (an `Arc`): the tables and value logs that hold every
//!   flushed memtable. Holding it is what keeps their files: a table or log
//!   a job drops is deleted only when the last holder of its `Arc` lets go
//!   (§1.1), so a merge, GC or split that runs meanwhile cannot remove a
//!   file under the copy;
//! * the **unflushed WALs** (one per immutable memtable, each opened here:
//!   a flush deletes its WAL only after it installs its tables, which needs
//!   the state lock held here, and an open file outlives its name) with the
//!   bytes each held at its rotation;
//! * the **active WAL**: its buffered records handed to the OS first
//!   (`manual_wal_flush`), then its size and `S`, the last sequence handed
//!   out. A writer takes its sequences and appends its record under the
//!   WAL lock, and WAL records follow sequence order, so the first `size`
//!   bytes hold exactly the batches up to `S`.
//!
//! Everything else runs with no lock held: the tables and value logs are
//! hard-linked into a temporary directory beside the destination (copied
//! from the open file when linking fails: another file system, or a name a
//! job has deleted meanwhile), the WAL prefixes are copied, and a manifest
//! is written fresh for the copy: the pinned version's partitions, tables
//! and value logs, `log_number` at the oldest WAL copied, `last_sequence`
//! `S`. Opening the copy replays the WAL prefixes over the tables, as any
//! recovery does. `CURRENT` is written last, the directory fsynced, and the
//! temporary directory renamed to the destination: a failure or crash
//! before the rename leaves no directory under the destination's name.
//!
//! Writes made with `disable_wal` and not yet flushed are not in the copy
//! (as after a crash), and change-feed holds are not copied: the copy has
//! no consumers, so the WALs retained only for the feed stay behind.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::core::Core;
use crate::error::{Error, IoContext, Result};
use crate::filename;
use crate::key::SequenceNumber;
use crate::manifest::{ManifestState, ManifestWriter, PartitionMeta, ValueLogMeta};
use crate::store::{TableFile, Version};
use crate::util::fs::{copy_to_new, file_name, parent_dir, FileSystem, WritableFile};

/// What [`crate::Db::checkpoint`] made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointInfo {
    /// The copy holds every logged batch up to this sequence and none
    /// after it; opened, its [`crate::Stats::sequence`] is this (unless
    /// the last batches were written without the WAL).
    pub sequence: SequenceNumber,
    /// Files hard-linked from the source (tables, value logs, index
    /// checkpoints): no bytes copied.
    pub files_linked: u64,
    /// Bytes of the files linked.
    pub bytes_linked: u64,
    /// Files written: the WALs cut at the sequence, files that could not
    /// be linked, the manifest and `CURRENT`.
    pub files_copied: u64,
    /// Bytes written.
    pub bytes_copied: u64,
}

/// One WAL the copy replays, with the bytes of it that hold batches up to
/// the checkpoint's sequence.
struct WalPrefix {
    number: u64,
    source: WalSource,
    bytes: u64,
}

/// An unflushed WAL, held open so that its flush cannot take it away.
enum WalSource {
    /// An immutable memtable's WAL, rotated out: whole.
    Closed(File),
    /// The active WAL: a second handle of its writer's file.
    Active(Arc<dyn WritableFile>),
}

impl WalSource {
    fn file(&self) -> &File {
        match self {
            WalSource::Closed(f) => f,
            WalSource::Active(h) => h.file(),
        }
    }
}

/// A database's files as of one sequence, pinned and held open: what a
/// checkpoint places into its directory and a backup stores
/// ([`CheckpointSource::capture`]; see the module docs). While it lives,
/// the files it names stay on disk (the pinned version's) or readable (the
/// WALs and index checkpoints, held open).
pub(crate) struct CheckpointSource {
    dir: PathBuf,
    version: Arc<Version>,
    /// Oldest first, the active WAL last.
    wals: Vec<WalPrefix>,
    sequence: SequenceNumber,
    next_file_number: u64,
    /// The index checkpoints still there when opened after the capture:
    /// partition, number, the file.
    index_checkpoints: Vec<(u64, u64, File)>,
    /// The lifetime counters (`STATS`) as last saved, if there: a copy
    /// keeps counting from them (statistics, not data: no sequence cut).
    stats: Option<File>,
}

/// One file of a [`CheckpointSource`].
pub(crate) struct SourceFile<'a> {
    /// Where it is in the source directory (the name may be gone: `file`
    /// is what to read); its file name is its name in a copy too.
    pub path: PathBuf,
    /// The file, held open.
    pub file: &'a File,
    /// How many of its bytes belong to the copy: `None` for the whole of
    /// an immutable file (which a copy may link), `Some` for a WAL, cut at
    /// the checkpoint's sequence (always copied).
    pub limit: Option<u64>,
}

impl CheckpointSource {
    /// Takes the version, the unflushed WALs and the sequence together:
    /// under the state lock (no flush installs, no rotation swaps the WAL),
    /// then the WAL lock (no append). Then, with no lock held, opens the
    /// index checkpoints: those replaced (and deleted) meanwhile are left
    /// out, and the copy's open rebuilds those partitions' indexes.
    pub(crate) fn capture(core: &Core) -> Result<CheckpointSource> {
        core.check_open()?;
        let mut st = core.state.lock();
        let mut wals = Vec::with_capacity(st.imms.len() + 1);
        for imm in &st.imms {
            let path = filename::wal_path(&core.dir, imm.wal_number);
            let file = (core.fs.open(&path))
                .context(|| format!("opening {} for a checkpoint", path.display()))?;
            wals.push(WalPrefix {
                number: imm.wal_number,
                source: WalSource::Closed(file),
                bytes: imm.wal_size,
            });
        }
        let active = {
            let mut wal = core.wal.lock();
            // Hands records buffered by `manual_wal_flush` to the OS, so
            // the file holds every record up to the sequence read next.
            let handle = wal.writer.sync_handle();
            handle.map(|handle| {
                let sequence = core.last_seq.load(Ordering::Relaxed);
                (wal.number, handle, wal.writer.size_in_file(), sequence)
            })
        };
        let (number, handle, bytes, sequence) = match active {
            Ok(a) => a,
            Err(e) => {
                // A failed WAL write poisons, as `Db::flush_wal`'s does.
                core.poison_holding_state(&e, &mut st);
                return Err(e);
            }
        };
        wals.push(WalPrefix {
            number,
            source: WalSource::Active(handle),
            bytes,
        });
        let version = Arc::clone(&st.version);
        let next_file_number = st.next_file_number;
        let index_checkpoints: BTreeMap<u64, u64> = st.index_checkpoints.clone();
        drop(st);
        let index_checkpoints = index_checkpoints
            .into_iter()
            .filter(|(pid, _)| version.partitions.iter().any(|p| p.id == *pid))
            .filter_map(|(pid, n)| {
                let path = filename::index_checkpoint_path(&core.dir, n);
                core.fs.open(&path).ok().map(|f| (pid, n, f))
            })
            .collect();
        let stats = core.fs.open(&filename::stats_path(&core.dir)).ok();
        Ok(CheckpointSource {
            dir: core.dir.clone(),
            version,
            wals,
            sequence,
            next_file_number,
            index_checkpoints,
            stats,
        })
    }

    /// The sequence the copy stands at.
    pub(crate) fn sequence(&self) -> SequenceNumber {
        self.sequence
    }

    /// The files of the copy but its manifest and `CURRENT`: tables, value
    /// logs, index checkpoints and `STATS` (whole), then the WAL prefixes.
    pub(crate) fn files(&self) -> Vec<SourceFile<'_>> {
        let whole = |path: PathBuf, file| SourceFile {
            path,
            file,
            limit: None,
        };
        let tables = (self.version.all_tables()).map(|t| {
            whole(
                filename::table_path(&self.dir, t.meta.number),
                t.table.file(),
            )
        });
        let logs = (self.version.value_logs.values())
            .map(|l| whole(l.file.path().to_path_buf(), l.file.file()));
        let index = (self.index_checkpoints.iter())
            .map(|(_, n, f)| whole(filename::index_checkpoint_path(&self.dir, *n), f));
        let wals = self.wals.iter().map(|w| SourceFile {
            path: filename::wal_path(&self.dir, w.number),
            file: w.source.file(),
            limit: Some(w.bytes),
        });
        let stats = (self.stats.iter()).map(|f| whole(filename::stats_path(&self.dir), f));
        tables
            .chain(logs)
            .chain(index)
            .chain(stats)
            .chain(wals)
            .collect()
    }

    /// The number of the copy's manifest: past every number the source had
    /// handed out at the capture.
    pub(crate) fn manifest_number(&self) -> u64 {
        self.next_file_number
    }

    /// What the copy's manifest holds: the pinned version, its WALs from
    /// the oldest copied on, the checkpoint's sequence, no change-feed
    /// holds.
    pub(crate) fn manifest_state(&self) -> ManifestState {
        let version = &self.version;
        let metas =
            |ts: &[Arc<TableFile>]| ts.iter().map(|t| (t.meta.number, t.meta.clone())).collect();
        ManifestState {
            log_number: self.wals.first().map_or(0, |w| w.number),
            next_file_number: self.manifest_number() + 1,
            last_sequence: self.sequence,
            partitions: (version.partitions.iter())
                .map(|p| {
                    let meta = PartitionMeta {
                        lower: p.lower.clone(),
                        upper: p.upper.clone(),
                        unsorted: metas(&p.unsorted),
                        sorted: metas(&p.sorted),
                    };
                    (p.id, meta)
                })
                .collect(),
            value_logs: (version.value_logs.iter())
                .map(|(n, l)| {
                    let meta = ValueLogMeta {
                        size: l.file.size(),
                        garbage: l.garbage,
                        refs: l.refs.clone(),
                    };
                    (*n, meta)
                })
                .collect(),
            index_checkpoints: (self.index_checkpoints.iter())
                .map(|(pid, n, _)| (*pid, *n))
                .collect(),
            ..ManifestState::default()
        }
    }
}

/// A checkpoint's temporary directory, removed with what it holds unless
/// `done` (renamed to the destination).
struct Staging<'a> {
    fs: &'a dyn FileSystem,
    dir: PathBuf,
    done: bool,
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        if !self.done {
            remove_dir_and_files(self.fs, &self.dir);
        }
    }
}

/// Removes the files in `dir`, then `dir` (best effort: what is left is a
/// hidden temporary directory, never a database under a name in use).
/// The removals are made durable before the directory goes (a file system
/// may keep a removed name until its directory is fsynced: `FaultFs` does).
pub(crate) fn remove_dir_and_files(fs: &dyn FileSystem, dir: &Path) {
    if let Ok(paths) = fs.read_dir(dir) {
        for p in paths {
            let _ = fs.remove_file(&p);
        }
    }
    let _ = fs.sync_dir(dir);
    let _ = fs.remove_dir(dir);
}

/// Checks that `dest` can receive a new directory: absent, or an empty
/// directory (which is then removed, to be replaced by the rename).
pub(crate) fn check_destination(fs: &dyn FileSystem, dest: &Path) -> Result<()> {
    if !fs.exists(dest) {
        return Ok(());
    }
    if !dest.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "{} exists and is not a directory",
            dest.display()
        )));
    }
    let entries = fs
        .read_dir(dest)
        .context(|| format!("listing {}", dest.display()))?;
    if !entries.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} exists and is not empty",
            dest.display()
        )));
    }
    Ok(())
}

/// A fresh temporary directory beside `dest` (on its file system, so that
/// the final rename stays within it), named after `dest` and hidden.
pub(crate) fn staging_dir(fs: &dyn FileSystem, dest: &Path, what: &str) -> Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let parent = parent_dir(dest);
    fs.create_dir_all(parent)
        .context(|| format!("creating {}", parent.display()))?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = parent.join(format!(
        ".{}.{what}-{}-{n}.tmp",
        file_name(dest),
        std::process::id()
    ));
    if fs.exists(&tmp) {
        // Left by a process with this id that crashed: never ours now.
        remove_dir_and_files(fs, &tmp);
    }
    fs.create_dir_all(&tmp)
        .context(|| format!("creating {}", tmp.display()))?;
    Ok(tmp)
}

/// Makes the finished `tmp` the directory `dest`: removes `dest` if it is
/// an empty directory, renames, fsyncs the parent so the name is durable
/// (and removes the copy again if that fsync fails).
pub(crate) fn publish_dir(fs: &dyn FileSystem, tmp: &Path, dest: &Path) -> Result<()> {
    if fs.exists(dest) {
        check_destination(fs, dest)?;
        fs.remove_dir(dest)
            .context(|| format!("replacing the empty directory {}", dest.display()))?;
    }
    fs.rename(tmp, dest)
        .context(|| format!("renaming {} to {}", tmp.display(), dest.display()))?;
    let parent = parent_dir(dest);
    let synced = fs
        .sync_dir(parent)
        .context(|| format!("syncing directory {}", parent.display()));
    if synced.is_err() {
        // The copy is whole, but its name may not survive a machine
        // crash: take it back, so that an error leaves nothing behind.
        remove_dir_and_files(fs, dest);
    }
    synced
}

/// Places one immutable file into the copy: a hard link when `link` (still)
/// allows, else a copy from its open file.
struct Placer<'a> {
    fs: &'a dyn FileSystem,
    to_dir: &'a Path,
    /// Cleared at the first link refused for a reason every other file
    /// shares (another file system, no hard links there).
    link: bool,
    info: CheckpointInfo,
}

impl Placer<'_> {
    fn place(&mut self, from: &Path, open: &File) -> Result<()> {
        let to = self.to_dir.join(file_name(from));
        if self.link {
            match self.fs.hard_link(from, &to) {
                Ok(()) => {
                    let bytes = open
                        .metadata()
                        .context(|| format!("reading the size of {}", from.display()))?
                        .len();
                    self.info.files_linked += 1;
                    self.info.bytes_linked += bytes;
                    return Ok(());
                }
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EXDEV | libc::EPERM | libc::EOPNOTSUPP | libc::ENOSYS)
                    ) =>
                {
                    self.link = false;
                }
                // The name went (a job deleted the file after this version
                // was pinned) or cannot take another link: copy this one.
                Err(_) => {}
            }
        }
        self.copy(open, None, &to)
    }

    fn copy(&mut self, from: &File, limit: Option<u64>, to: &Path) -> Result<()> {
        let copied = copy_to_new(self.fs, from, limit, to)
            .context(|| format!("copying into {}", to.display()))?;
        self.info.files_copied += 1;
        self.info.bytes_copied += copied.bytes;
        Ok(())
    }
}

/// [`crate::Db::checkpoint`].
pub(crate) fn checkpoint(core: &Core, dest: &Path) -> Result<CheckpointInfo> {
    core.check_open()?;
    let fs = &*core.fs;
    check_destination(fs, dest)?;
    let tmp = staging_dir(fs, dest, "checkpoint")?;
    let mut staging = Staging {
        fs,
        dir: tmp,
        done: false,
    };
    let source = CheckpointSource::capture(core)?;
    // The unit tests' window for jobs that delete what was captured.
    crate::fault::pause_point("checkpoint.captured", &core.dir);
    let mut placer = Placer {
        fs,
        to_dir: &staging.dir,
        link: true,
        info: CheckpointInfo {
            sequence: source.sequence(),
            ..CheckpointInfo::default()
        },
    };
    for f in source.files() {
        match f.limit {
            None => placer.place(&f.path, f.file)?,
            Some(bytes) => {
                let to = staging.dir.join(file_name(&f.path));
                placer.copy(f.file, Some(bytes), &to)?;
            }
        }
    }
    // Writes the manifest (fdatasynced), then CURRENT, then fsyncs the
    // directory: every name above is durable with it.
    let number = source.manifest_number();
    let (_manifest, manifest_bytes) =
        ManifestWriter::create(fs, &staging.dir, number, &source.manifest_state())?;
    placer.info.files_copied += 2;
    placer.info.bytes_copied +=
        manifest_bytes + crate::manifest::current_contents(number).len() as u64;
    let info = placer.info;
    publish_dir(fs, &staging.dir, dest)?;
    staging.done = true;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fault::gates;
    use crate::{Db, Options};

    fn sst_names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sst"))
            .collect();
        v.sort();
        v
    }

    /// A merge and a flush run while a checkpoint is held right after its
    /// capture: the tables the merge drops stay on disk until the copy has
    /// them (the pinned version holds them), the WAL the flush deletes is
    /// still read whole through the handle taken, and nothing written
    /// after the capture reaches the copy.
    #[test]
    fn what_jobs_delete_meanwhile_stays_for_the_copy() {
        const POINT: &str = "checkpoint.captured";
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default().values_in_wal(false);
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        for round in 0..3 {
            for i in 0..200 {
                db.put(format!("k{i:04}"), format!("v{round}-{i}")).unwrap();
            }
            db.flush().unwrap();
        }
        // Unflushed, in the active WAL only.
        db.put("tail", "in the WAL").unwrap();
        let before = sst_names(db.path());
        assert_eq!(before.len(), 3, "three flushed tables");
        let gate = gates::close(POINT, db.path());
        let dest = dir.path().join("copy");
        let taker = {
            let (db, dest) = (db.clone(), dest.clone());
            std::thread::spawn(move || db.checkpoint(&dest))
        };
        assert!(gates::wait_reached(
            POINT,
            db.path(),
            Duration::from_secs(60)
        ));
        db.put("after", "not in the copy").unwrap();
        // Flushes the WAL holding "tail" (deleting it: no value lives in
        // it), then merges the three tables into a new one.
        db.compact().unwrap();
        let now = sst_names(db.path());
        for name in &before {
            assert!(
                now.contains(name),
                "{name} was deleted while the checkpoint held its version"
            );
        }
        gates::open(POINT, db.path());
        drop(gate);
        let info = taker.join().unwrap().unwrap();
        let after = sst_names(db.path());
        assert!(
            before.iter().all(|n| !after.contains(n)),
            "released by the checkpoint, the merged tables go: {after:?}"
        );
        db.close().unwrap();
        let copy = Db::open(&dest, opts).unwrap();
        assert_eq!(copy.stats().sequence, info.sequence);
        assert_eq!(copy.get("k0007").unwrap().as_deref(), Some(&b"v2-7"[..]));
        assert_eq!(
            copy.get("tail").unwrap().as_deref(),
            Some(&b"in the WAL"[..])
        );
        assert_eq!(copy.get("after").unwrap(), None);
        assert_eq!(copy.range::<&[u8], _>(..).unwrap().count(), 201);
    }

    /// A file whose name is gone (or cannot be linked) is copied from the
    /// file held open.
    #[test]
    fn a_file_that_cannot_be_linked_is_copied_from_the_open_file() {
        let fs = crate::util::fs::real();
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("000007.sst");
        crate::util::fs::write_new_synced(&*fs, &from, b"table bytes").unwrap();
        let open = fs.open(&from).unwrap();
        fs.remove_file(&from).unwrap();
        let to_dir = dir.path().join("copy");
        fs.create_dir_all(&to_dir).unwrap();
        let mut placer = Placer {
            fs: &*fs,
            to_dir: &to_dir,
            link: true,
            info: CheckpointInfo::default(),
        };
        placer.place(&from, &open).unwrap();
        assert_eq!(fs.read(&to_dir.join("000007.sst")).unwrap(), b"table bytes");
        assert_eq!(
            (placer.info.files_copied, placer.info.bytes_copied),
            (1, 11)
        );
        assert_eq!(placer.info.files_linked, 0);
        assert!(placer.link, "a missing name does not stop later links");
    }
}
