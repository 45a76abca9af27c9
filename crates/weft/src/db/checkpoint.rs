//! Checkpoints ([`crate::Db::checkpoint`]): a consistent, openable copy of
//! a live database in another directory, taken without stopping writers
//! (`docs/DESIGN.md` §1.5.2, crash safety §5.14).
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
use crate::store::Version;
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

/// The engine state a checkpoint copies, taken in one critical section.
struct Captured {
    version: Arc<Version>,
    /// Oldest first, the active WAL last.
    wals: Vec<WalPrefix>,
    sequence: SequenceNumber,
    next_file_number: u64,
    index_checkpoints: BTreeMap<u64, u64>,
}

/// Takes the version, the unflushed WALs and the sequence together (see
/// the module docs): under the state lock (no flush installs, no rotation
/// swaps the WAL), then the WAL lock (no append).
fn capture(core: &Core) -> Result<Captured> {
    let mut st = core.state.lock();
    let mut wals = Vec::with_capacity(st.imms.len() + 1);
    for imm in &st.imms {
        let path = filename::wal_path(&core.dir, imm.wal_number);
        let file = core
            .fs
            .open(&path)
            .context(|| format!("opening {} for a checkpoint", path.display()))?;
        wals.push(WalPrefix {
            number: imm.wal_number,
            source: WalSource::Closed(file),
            bytes: imm.wal_size,
        });
    }
    let active = {
        let mut wal = core.wal.lock();
        // Hands records buffered by `manual_wal_flush` to the OS, so the
        // file holds every record up to the sequence read next.
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
    Ok(Captured {
        version: Arc::clone(&st.version),
        wals,
        sequence,
        next_file_number: st.next_file_number,
        index_checkpoints: st.index_checkpoints.clone(),
    })
}

/// A checkpoint's temporary directory, removed with what it holds unless
/// [`Staging::finish`] renamed it to the destination.
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
    let captured = capture(core)?;
    // The unit tests' window for jobs that delete what was captured.
    crate::fault::pause_point("checkpoint.captured", &core.dir);
    let mut placer = Placer {
        fs,
        to_dir: &staging.dir,
        link: true,
        info: CheckpointInfo {
            sequence: captured.sequence,
            ..CheckpointInfo::default()
        },
    };
    let version = &captured.version;
    for t in version.all_tables() {
        let path = filename::table_path(&core.dir, t.meta.number);
        placer.place(&path, t.table.file())?;
    }
    for log in version.value_logs.values() {
        placer.place(log.file.path(), log.file.file())?;
    }
    // Index checkpoints only spare the copy's open a rebuild of the hash
    // index: one replaced (and deleted) since the capture is left out, and
    // that partition's index is rebuilt from its tables.
    let mut index_checkpoints = BTreeMap::new();
    for (pid, n) in &captured.index_checkpoints {
        if !version.partitions.iter().any(|p| p.id == *pid) {
            continue;
        }
        let path = filename::index_checkpoint_path(&core.dir, *n);
        let Ok(open) = fs.open(&path) else {
            continue;
        };
        placer.place(&path, &open)?;
        index_checkpoints.insert(*pid, *n);
    }
    for w in &captured.wals {
        let to = filename::wal_path(&staging.dir, w.number);
        placer.copy(w.source.file(), Some(w.bytes), &to)?;
    }

    let manifest_number = captured.next_file_number;
    let state = ManifestState {
        log_number: captured.wals.first().map_or(0, |w| w.number),
        next_file_number: manifest_number + 1,
        last_sequence: captured.sequence,
        partitions: version
            .partitions
            .iter()
            .map(|p| {
                let metas = |ts: &[Arc<crate::store::TableFile>]| {
                    ts.iter().map(|t| (t.meta.number, t.meta.clone())).collect()
                };
                let meta = PartitionMeta {
                    lower: p.lower.clone(),
                    upper: p.upper.clone(),
                    unsorted: metas(&p.unsorted),
                    sorted: metas(&p.sorted),
                };
                (p.id, meta)
            })
            .collect(),
        value_logs: version
            .value_logs
            .iter()
            .map(|(n, l)| {
                let meta = ValueLogMeta {
                    size: l.file.size(),
                    garbage: l.garbage,
                    refs: l.refs.clone(),
                };
                (*n, meta)
            })
            .collect(),
        index_checkpoints,
        ..ManifestState::default()
    };
    // Writes the manifest (fsynced), then CURRENT, then fsyncs the
    // directory: every name above is durable with it.
    let (_manifest, manifest_bytes) =
        ManifestWriter::create(fs, &staging.dir, manifest_number, &state)?;
    placer.info.files_copied += 2;
    placer.info.bytes_copied +=
        manifest_bytes + filename::manifest_name(manifest_number).len() as u64 + 1;
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
