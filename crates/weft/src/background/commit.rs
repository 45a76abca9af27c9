//! The one way a job makes its work live. [`NewFiles`] owns the files a job
//! wrote until its manifest edit is durable, and [`commit_edit`] makes,
//! appends and installs that edit with the locking the module docs of
//! [`crate::background`] argue for. Written once, so that every job takes
//! the locks in the same order, never blocks writers on the fdatasync, and
//! cleans up after a failure the same way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::MutexGuard;

use crate::db::core::{Core, Counters, EngineState};
use crate::error::{Error, Result};
use crate::filename;
use crate::manifest::{ManifestWriter, VersionEdit};
use crate::store::{FileMeta, TableFile};
use crate::util::fs::Fs;

/// Files a job wrote that no manifest edit names yet. Unless [`keep`] is
/// called (by [`commit_edit`], once the edit is durable), dropping it deletes
/// them: no version ever listed them, so no reader can hold them, and an
/// early return or `?` anywhere between writing them and the append then
/// cleans up without a hand-written path. The next open would remove them
/// as orphans too, but a failed job poisons the database, which may go on
/// serving reads for a long time before it is reopened.
///
/// Make it before opening handles on its files ([`TableFile`],
/// `ValueLogFile`): locals drop in reverse order, so on an early return the
/// handles close before the names go. Linux lets an open file be unlinked,
/// but the job's last reference to a file should not outlive its name (a
/// mapped table would keep its pages until unmapped).
///
/// [`keep`]: NewFiles::keep
pub(super) struct NewFiles<'a> {
    fs: &'a Fs,
    dir: &'a Path,
    paths: Vec<PathBuf>,
}

impl<'a> NewFiles<'a> {
    /// No files yet, in database directory `dir` on `fs`.
    pub fn new(fs: &'a Fs, dir: &'a Path) -> NewFiles<'a> {
        NewFiles {
            fs,
            dir,
            paths: Vec::new(),
        }
    }

    /// Takes on the tables `files`.
    pub fn add_tables(&mut self, files: &[FileMeta]) {
        for f in files {
            self.paths.push(filename::table_path(self.dir, f.number));
        }
    }

    /// Takes on value log `number`.
    pub fn add_value_log(&mut self, number: u64) {
        self.paths.push(filename::value_log_path(self.dir, number));
    }

    /// Takes on index checkpoint `number`, before it is written (a partly
    /// written one must go too), and returns its path.
    pub fn add_index_checkpoint(&mut self, number: u64) -> PathBuf {
        let path = filename::index_checkpoint_path(self.dir, number);
        self.paths.push(path.clone());
        path
    }

    /// The files are live (or handed on to a caller's guard): nothing is
    /// deleted on drop.
    pub fn keep(mut self) {
        self.paths.clear();
    }
}

impl Drop for NewFiles<'_> {
    fn drop(&mut self) {
        for path in &self.paths {
            // A failure leaves an orphan that the next open removes.
            let _ = self.fs.remove_file(path);
        }
    }
}

/// Opens the tables a job just wrote (the caller's [`NewFiles`] holds them,
/// so a failure here leaves nothing behind once the job returns).
pub(super) fn open_new_tables(core: &Core, files: &[FileMeta]) -> Result<Vec<Arc<TableFile>>> {
    files
        .iter()
        .map(|f| {
            TableFile::open(
                &core.fs,
                &core.dir,
                f.clone(),
                &core.cache,
                core.options.block_reads(),
            )
        })
        .collect()
}

/// Makes a job's work live, in the order every job follows:
///
/// 0. fsyncs the database directory when `files` holds any, so their names
///    are durable before the edit that names them (a file's own fsync does
///    not cover its directory entry: after a machine crash the manifest
///    must never name a file the directory lost);
/// 1. takes [`Core::manifest`], then the state lock, and asks `make_edit`
///    for the edit and whatever `install` will need from that same state
///    (`None`: nothing to commit after all; `files` are deleted and the
///    result is `Ok(None)`);
/// 2. appends the edit and fdatasyncs it with the state lock released
///    ([`append_edit`]); on failure returns the error, `install` (and the
///    handles it owns) dropped first, then `files`, which deletes them —
///    unless the edit reached the manifest whole and only its fdatasync
///    failed: it may be durable then, and the files stay for the next open
///    to keep or sweep;
/// 3. keeps `files`, passes `crash_point`, and runs `install` on the state;
/// 4. if `install` replaced the version, publishes a new super version and
///    wakes waiters (an index checkpoint changes no version, so readers'
///    view and sleepers are left alone);
/// 5. deletes the WALs the change feed retained that no hold in the
///    manifest pins any more: every edit carries the holds released since
///    the last one (`db::feed`).
///
/// The manifest lock is held from step 1 to the end, so no other job's edit
/// reaches the manifest or the version in between: what `make_edit` saw is
/// what `install` changes, and the manifest's order is the install order.
pub(super) fn commit_edit<P, T>(
    core: &Core,
    files: NewFiles<'_>,
    crash_point: Option<&str>,
    make_edit: impl FnOnce(&mut EngineState) -> Option<(VersionEdit, P)>,
    install: impl FnOnce(&mut EngineState, P) -> T,
) -> Result<Option<T>> {
    if !files.paths.is_empty() {
        core.fs
            .sync_dir(&core.dir)
            .map_err(|e| Error::io(format!("syncing directory {}", core.dir.display()), e))?;
    }
    let mut manifest = core.manifest.lock();
    let mut st = core.state.lock();
    let Some((mut edit, found)) = make_edit(&mut st) else {
        drop(st);
        drop(install);
        drop(files);
        return Ok(None);
    };
    // Change-feed releases not yet in the manifest ride along (`db::feed`).
    let holds = st.feed.unpersisted();
    edit.holds.extend(holds.iter().cloned());
    let manifest_size = manifest.size();
    match append_edit(core, &mut manifest, &mut st, &edit) {
        Ok(n) => Counters::add(&core.counters.manifest_bytes, n),
        Err(e) => {
            drop(st);
            drop((found, install));
            if manifest.size() > manifest_size {
                // The edit reached the file whole and only its fdatasync
                // failed: it may be durable, and then it names these files.
                // They stay; the next open keeps them or sweeps them as
                // orphans, as the manifest it reads says.
                files.keep();
            } else {
                drop(files);
            }
            return Err(e);
        }
    }
    files.keep();
    st.feed.note_persisted(&holds);
    if let Some(point) = crash_point {
        crate::fault::crash_point(point);
    }
    let before = Arc::clone(&st.version);
    let out = install(&mut st, found);
    let replaced = !Arc::ptr_eq(&before, &st.version);
    drop(before);
    if replaced {
        core.install_super_version(&st);
        core.state_cv.notify_all();
    }
    // The holds that rode along may have let WALs go.
    let released_wals = core.prune_retained_wals(&mut st);
    drop(st);
    drop(manifest);
    core.remove_wals(released_wals);
    Ok(Some(out))
}

/// Appends a job's `edit` to the manifest (and fdatasyncs it) with the
/// state lock released; the caller holds [`Core::manifest`] from making
/// the edit through installing it (see [`commit_edit`]). Returns the bytes
/// appended.
fn append_edit(
    core: &Core,
    manifest: &mut ManifestWriter,
    st: &mut MutexGuard<'_, EngineState>,
    edit: &VersionEdit,
) -> Result<u64> {
    MutexGuard::unlocked(st, || {
        crate::fault::pause_point("manifest.append", &core.dir);
        #[cfg(test)]
        failing_appends::check(&core.dir, edit)?;
        manifest.append(edit)
    })
}

/// Test hook: makes a job's manifest append fail, as a full disk would,
/// for the edits a test picks, in one database directory only (tests run
/// side by side in one process). Compiled into unit tests only.
#[cfg(test)]
pub(super) mod failing_appends {
    use std::path::{Path, PathBuf};

    use parking_lot::Mutex;

    use crate::error::{Error, Result};
    use crate::manifest::VersionEdit;

    type Picks = fn(&VersionEdit) -> bool;

    static ARMED: Mutex<Vec<(PathBuf, Picks)>> = Mutex::new(Vec::new());

    /// Disarms its directory when dropped, so a failing test leaves no
    /// trap for the reopen it may do next.
    pub struct Armed(PathBuf);

    impl Drop for Armed {
        fn drop(&mut self) {
            ARMED.lock().retain(|(d, _)| *d != self.0);
        }
    }

    /// Fails every append in `dir` of an edit that `picks` accepts.
    #[must_use]
    pub fn arm(dir: &Path, picks: Picks) -> Armed {
        ARMED.lock().push((dir.to_path_buf(), picks));
        Armed(dir.to_path_buf())
    }

    pub(in crate::background) fn check(dir: &Path, edit: &VersionEdit) -> Result<()> {
        let armed = ARMED.lock();
        if armed.iter().any(|(d, picks)| d == dir && picks(edit)) {
            return Err(Error::io(
                "appending to the manifest",
                std::io::Error::other("injected by a test"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, b"x").unwrap();
        path
    }

    /// A guard dropped without `keep` deletes every file it took on (tables,
    /// value log, index checkpoint); a kept one deletes none.
    #[test]
    fn new_files_are_deleted_unless_kept() {
        let dir = tempfile::tempdir().unwrap();
        let fs = crate::util::fs::real();
        let meta = |number| FileMeta {
            number,
            size: 1,
            entries: 1,
            smallest: Vec::new(),
            largest: Vec::new(),
        };
        let made = |files: &mut NewFiles<'_>| {
            let paths = vec![
                touch(dir.path(), "000007.sst"),
                touch(dir.path(), "000008.sst"),
                touch(dir.path(), "000009.vlog"),
            ];
            files.add_tables(&[meta(7), meta(8)]);
            files.add_value_log(9);
            let hix = files.add_index_checkpoint(10);
            std::fs::write(&hix, b"x").unwrap();
            [paths, vec![hix]].concat()
        };

        let mut files = NewFiles::new(&fs, dir.path());
        let paths = made(&mut files);
        files.keep();
        assert!(paths.iter().all(|p| p.exists()), "kept files stay");

        let mut files = NewFiles::new(&fs, dir.path());
        let paths = made(&mut files);
        drop(files);
        let left: Vec<_> = paths.iter().filter(|p| p.exists()).collect();
        assert!(left.is_empty(), "dropped armed, yet {left:?} remain");
        // An unwritten file (a job that failed before writing it) is fine.
        let mut files = NewFiles::new(&fs, dir.path());
        files.add_value_log(11);
        drop(files);
    }
}
