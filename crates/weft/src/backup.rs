//! Incremental backups ([`BackupEngine`], after RocksDB's `BackupEngine`):
//! a backup directory holding any number of backups of one or more
//! databases, each consistent at one sequence, each file stored once
//! however many backups hold it (`docs/DESIGN.md` §1.5.2, the directory's
//! format §2.10, crash safety §5.14).
//!
//! A backup stores what a checkpoint ([`Db::checkpoint`]) would place in
//! its directory, taken the same way (`db::CheckpointSource`): the
//! version, the unflushed WALs and the sequence captured in one critical
//! section, so a backup is consistent at one sequence with writers
//! running. The files are read straight from the database (the pinned
//! version keeps them on disk, the WALs are held open and read only up to
//! the sequence), and the manifest and `CURRENT` the checkpoint would
//! write are built in memory: nothing is written into a temporary copy
//! first, which on another file system than the database's would have
//! copied every file on every backup.
//!
//! Each file is identified by its name, size and CRC32C and copied into
//! `shared/` only if no earlier backup stored that very file. A table or
//! value log never changes under its name, so a second backup copies only
//! what was written since the first (new tables and logs, the WAL tail, a
//! manifest, `CURRENT`); the checksum is still computed from the bytes,
//! not assumed from the name, so a file that did change (a WAL cut at
//! another sequence, a `CURRENT` naming another manifest) is stored as the
//! new file it is. Last, a meta file listing the backup's files with their
//! sizes and checksums is written atomically (temporary name, fsync,
//! rename, directory fsync): the backup exists once its meta does.
//!
//! [`BackupEngine::restore`] copies a backup's files into a new directory,
//! checking each file's size and CRC32C as it copies (a mismatch is
//! [`Error::Corruption`] naming the backup's file), and renames the
//! directory into place, as a checkpoint does. [`BackupEngine::delete`]
//! removes a meta file, then every shared file no remaining backup lists.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::db::{check_destination, publish_dir, remove_dir_and_files, staging_dir, Db, DirLock};
use crate::error::{Error, IoContext, Result};
use crate::filename::{parse_file_name, FileKind};
use crate::util::fs::{checksum, copy_to_new, file_name, real, FileSystem, Fs};

/// A backup's number in its backup directory: 1 for the first, then one
/// past the highest present.
pub type BackupId = u64;

/// One backup, as [`BackupEngine::list`] describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// Its number.
    pub id: BackupId,
    /// When it was made, in seconds since the Unix epoch.
    pub created_unix_secs: u64,
    /// The database it restores is the source as of this sequence
    /// ([`crate::CheckpointInfo::sequence`]).
    pub sequence: u64,
    /// Files it holds.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of those, the files no earlier backup had stored: what making it
    /// copied into the backup directory.
    pub new_files: u64,
    /// Their bytes.
    pub new_bytes: u64,
}

/// A file of a backup: its name in the database directory, size and
/// CRC32C (unmasked).
#[derive(Debug, Clone, PartialEq, Eq)]
struct BackupFile {
    name: String,
    size: u64,
    crc32c: u32,
}

impl BackupFile {
    /// Its name in `shared/`: the database's name with the checksum and
    /// size before the extension (`000012_1a2b3c4d_4096.sst`), so two
    /// different files of one name (a WAL cut at two sequences) are kept
    /// apart, and one file held by many backups is stored once.
    fn shared_name(&self) -> String {
        let (before, after) = shared_name_around(&self.name, self.size);
        format!("{before}{:08x}{after}", self.crc32c)
    }
}

/// What a shared name holds before and after the checksum, for a file of
/// `name` and `size` bytes.
fn shared_name_around(name: &str, size: u64) -> (String, String) {
    match name.rsplit_once('.') {
        Some((stem, ext)) => (format!("{stem}_"), format!("_{size}.{ext}")),
        None => (format!("{name}_"), format!("_{size}")),
    }
}

/// A backup's meta file, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Meta {
    info: BackupInfo,
    files: Vec<BackupFile>,
}

/// The meta file format's version (`docs/DESIGN.md` §2.10).
const META_VERSION: u64 = 1;

impl Meta {
    fn encode(&self) -> Vec<u8> {
        let i = &self.info;
        let mut text = format!(
            "weft-backup {META_VERSION}\nid {}\ncreated {}\nsequence {}\nnew {} {}\n",
            i.id, i.created_unix_secs, i.sequence, i.new_files, i.new_bytes
        );
        for f in &self.files {
            text.push_str(&format!("file {} {} {:08x}\n", f.name, f.size, f.crc32c));
        }
        let crc = crc32c::crc32c(text.as_bytes());
        text.push_str(&format!("crc32c {crc:08x}\n"));
        text.into_bytes()
    }

    /// Parses the meta file at `path` (named by `id`), checking its
    /// checksum first; anything malformed is corruption at its line.
    fn decode(path: &Path, id: BackupId, bytes: &[u8]) -> Result<Meta> {
        let bad = |offset: usize, reason: String| Error::corruption(path, offset as u64, reason);
        let text = std::str::from_utf8(bytes)
            .map_err(|e| bad(e.valid_up_to(), "backup meta file is not UTF-8".into()))?;
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map_or(0, |at| at + 1);
        let (body, last) = text.split_at(body_end);
        let stored = last
            .strip_prefix("crc32c ")
            .and_then(|s| s.strip_suffix('\n'))
            .and_then(|s| u32::from_str_radix(s, 16).ok())
            .ok_or_else(|| {
                bad(
                    body_end,
                    "backup meta file does not end in its checksum".into(),
                )
            })?;
        let actual = crc32c::crc32c(body.as_bytes());
        if actual != stored {
            return Err(bad(
                0,
                format!("backup meta file's CRC32C is {actual:08x}, it records {stored:08x}"),
            ));
        }
        let mut info = BackupInfo {
            id,
            created_unix_secs: 0,
            sequence: 0,
            files: 0,
            bytes: 0,
            new_files: 0,
            new_bytes: 0,
        };
        let mut files = Vec::new();
        let mut offset = 0;
        for (n, line) in body.lines().enumerate() {
            let at = offset;
            offset += line.len() + 1;
            let fields: Vec<&str> = line.split(' ').collect();
            let num = |s: &str| {
                s.parse::<u64>()
                    .map_err(|_| bad(at, format!("{s:?} is not a number in {line:?}")))
            };
            match (n, fields.as_slice()) {
                (0, ["weft-backup", v]) => {
                    let found = num(v)?;
                    if found != META_VERSION {
                        return Err(Error::Unsupported {
                            path: path.to_path_buf(),
                            found,
                            supported: META_VERSION,
                        });
                    }
                }
                (0, _) => return Err(bad(0, "not a Weft backup meta file".into())),
                (_, ["id", v]) if num(v)? == id => {}
                (_, ["created", v]) => info.created_unix_secs = num(v)?,
                (_, ["sequence", v]) => info.sequence = num(v)?,
                (_, ["new", files, bytes]) => {
                    info.new_files = num(files)?;
                    info.new_bytes = num(bytes)?;
                }
                (_, ["file", name, size, crc]) => {
                    check_backed_up_name(name).map_err(|r| bad(at, r))?;
                    let crc32c = u32::from_str_radix(crc, 16)
                        .map_err(|_| bad(at, format!("{crc:?} is not a checksum")))?;
                    files.push(BackupFile {
                        name: name.to_string(),
                        size: num(size)?,
                        crc32c,
                    });
                }
                _ => return Err(bad(at, format!("unexpected line {line:?}"))),
            }
        }
        info.files = files.len() as u64;
        info.bytes = files.iter().map(|f| f.size).sum();
        if !files.iter().any(|f| f.name == "CURRENT") {
            return Err(bad(0, "backup lists no CURRENT".into()));
        }
        Ok(Meta { info, files })
    }
}

/// Whether `name` is a file a backup may hold: a database file Weft
/// writes (never a path: a restore writes only inside its directory).
fn check_backed_up_name(name: &str) -> std::result::Result<(), String> {
    match parse_file_name(name) {
        Some(
            FileKind::Current
            | FileKind::Manifest(_)
            | FileKind::Wal(_)
            | FileKind::Table(_)
            | FileKind::ValueLog(_)
            | FileKind::IndexCheckpoint(_)
            | FileKind::Stats,
        ) if !name.contains('/') => Ok(()),
        _ => Err(format!("{name:?} is not a database file")),
    }
}

/// A backup directory, open and locked (one `BackupEngine` per directory
/// at a time, across processes: its `LOCK` file is held with `flock` as a
/// database's is). `Send + Sync`; its calls run one at a time.
///
/// ```
/// use weft::{BackupEngine, Db, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
/// let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
///
/// db.put("k", "v1").unwrap();
/// let first = backups.create_backup(&db).unwrap();
/// db.put("k", "v2").unwrap();
/// let second = backups.create_backup(&db).unwrap();
/// assert_eq!(backups.list().unwrap().len(), 2);
///
/// backups.restore(first, dir.path().join("restored")).unwrap();
/// let old = Db::open(dir.path().join("restored"), Options::default()).unwrap();
/// assert_eq!(old.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
///
/// backups.delete(first).unwrap(); // the second stays restorable
/// assert_eq!(backups.list().unwrap()[0].id, second);
/// ```
#[derive(Debug)]
pub struct BackupEngine {
    dir: PathBuf,
    fs: Fs,
    /// Serialises this engine's calls (each reads and changes the whole
    /// directory).
    calls: Mutex<()>,
    _lock: DirLock,
}

impl BackupEngine {
    /// Opens the backup directory `dir`, creating it if missing, and locks
    /// it ([`Error::Locked`] if another `BackupEngine` has it). Leftovers
    /// of a call a crash interrupted are removed: temporary files, and
    /// shared files no backup lists (copied by a backup whose meta file was
    /// never written, or left by a delete).
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        let dir = dir.as_ref().to_path_buf();
        let fs = real();
        for d in [dir.clone(), dir.join("shared"), dir.join("meta")] {
            fs.create_dir_all(&d)
                .context(|| format!("creating {}", d.display()))?;
        }
        let lock = DirLock::acquire(&*fs, &dir)?;
        let engine = BackupEngine {
            dir,
            fs,
            calls: Mutex::new(()),
            _lock: lock,
        };
        engine.remove_leftovers()?;
        Ok(engine)
    }

    fn shared(&self) -> PathBuf {
        self.dir.join("shared")
    }

    fn meta_dir(&self) -> PathBuf {
        self.dir.join("meta")
    }

    fn meta_path(&self, id: BackupId) -> PathBuf {
        self.meta_dir().join(id.to_string())
    }

    /// The ids of the backups present, ascending.
    fn ids(&self) -> Result<Vec<BackupId>> {
        let meta = self.meta_dir();
        let mut ids: Vec<BackupId> = (self.fs.read_dir(&meta))
            .context(|| format!("listing {}", meta.display()))?
            .iter()
            .filter_map(|p| file_name(p).parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn read_meta(&self, id: BackupId) -> Result<Meta> {
        let path = self.meta_path(id);
        if !self.fs.exists(&path) {
            return Err(Error::InvalidArgument(format!(
                "no backup {id} in {}",
                self.dir.display()
            )));
        }
        let bytes = (self.fs.read(&path)).context(|| format!("reading {}", path.display()))?;
        Meta::decode(&path, id, &bytes)
    }

    /// Every backup, oldest first. A damaged meta file is
    /// [`Error::Corruption`] naming it.
    pub fn list(&self) -> Result<Vec<BackupInfo>> {
        let _calls = self.calls.lock();
        self.ids()?
            .into_iter()
            .map(|id| Ok(self.read_meta(id)?.info))
            .collect()
    }

    /// Backs `db` up, consistent at one sequence, while writers go on;
    /// copies only the files no earlier backup in this directory stored.
    /// The backup exists, durably, once this returns; a failure leaves the
    /// earlier backups as they were and nothing of this one.
    ///
    /// Until it returns, the files of the database's version at the
    /// backup's sequence stay on disk even if jobs drop them (as a
    /// checkpoint holds them, `Db::checkpoint`): a long backup delays the
    /// deletion of what merges replace meanwhile.
    pub fn create_backup(&self, db: &Db) -> Result<BackupId> {
        let _calls = self.calls.lock();
        let id = self.ids()?.last().map_or(1, |last| last + 1);
        let shared = self.shared();
        let present: BTreeSet<String> = (self.fs.read_dir(&shared))
            .context(|| format!("listing {}", shared.display()))?
            .iter()
            .map(|p| file_name(p))
            .collect();
        let mut store = Store {
            fs: &*self.fs,
            shared,
            present,
            copied: Undo {
                fs: &*self.fs,
                dir: None,
                files: Vec::new(),
            },
            files: Vec::new(),
            new_files: 0,
            new_bytes: 0,
        };
        let source = crate::util::fs::activity("backup", || db.checkpoint_source())?;
        let sequence = source.sequence();
        for f in source.files() {
            store.file(file_name(&f.path), f.file, f.limit)?;
        }
        // The manifest and CURRENT a checkpoint would write, built here.
        let number = source.manifest_number();
        let manifest = crate::manifest::snapshot_image(&source.manifest_state())?;
        store.bytes(crate::filename::manifest_name(number), &manifest)?;
        let current = crate::manifest::current_contents(number);
        store.bytes("CURRENT".to_string(), current.as_bytes())?;
        // Every byte is read: the database may let go of the files.
        drop(source);
        (self.fs.sync_dir(&store.shared))
            .context(|| format!("syncing directory {}", store.shared.display()))?;
        let files = std::mem::take(&mut store.files);
        let meta = Meta {
            info: BackupInfo {
                id,
                created_unix_secs: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                sequence,
                files: files.len() as u64,
                bytes: files.iter().map(|f| f.size).sum(),
                new_files: store.new_files,
                new_bytes: store.new_bytes,
            },
            files,
        };
        self.write_meta(&meta, &mut store.copied)?;
        Ok(id)
    }

    /// Writes `meta` atomically: a temporary file, fsynced, renamed over
    /// its name, the directory fsynced. Once the rename is done the files
    /// it lists are kept (taken from `copied`), even if the directory's
    /// fsync then fails: the meta file may survive a crash, and must not
    /// name files that are gone; if it does not survive, they are unlisted
    /// and the next open removes them.
    fn write_meta(&self, meta: &Meta, copied: &mut Undo<'_>) -> Result<()> {
        let dir = self.meta_dir();
        let path = self.meta_path(meta.info.id);
        let tmp = dir.join(format!("{}.tmp", meta.info.id));
        crate::util::fs::write_new_synced(&*self.fs, &tmp, &meta.encode())
            .context(|| format!("writing {}", tmp.display()))?;
        (self.fs.rename(&tmp, &path))
            .context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        copied.files.clear();
        (self.fs.sync_dir(&dir)).context(|| format!("syncing directory {}", dir.display()))
    }

    /// Restores backup `id` into the new directory `dest` (absent or
    /// empty), as the database it backed up was at
    /// [`BackupInfo::sequence`]. Every file is checked against the size and
    /// CRC32C the backup recorded as it is copied: a mismatch is
    /// [`Error::Corruption`] naming the backup's file, and leaves nothing
    /// under `dest`.
    pub fn restore(&self, id: BackupId, dest: impl AsRef<Path>) -> Result<()> {
        let _calls = self.calls.lock();
        let dest = dest.as_ref();
        let meta = self.read_meta(id)?;
        let fs = &*self.fs;
        check_destination(fs, dest)?;
        let tmp = staging_dir(fs, dest, "restore")?;
        let mut staging = Undo {
            fs,
            dir: Some(tmp.clone()),
            files: Vec::new(),
        };
        let shared = self.shared();
        // CURRENT last: a directory holding it holds everything else.
        let mut files = meta.files.clone();
        files.sort_by_key(|f| f.name == "CURRENT");
        for f in &files {
            let from = shared.join(f.shared_name());
            let open = fs.open(&from).map_err(|e| {
                Error::corruption(&from, 0, format!("backup {id}'s file cannot be read: {e}"))
            })?;
            let to = tmp.join(&f.name);
            let copied = copy_to_new(fs, &open, None, &to)
                .context(|| format!("copying {} to {}", from.display(), to.display()))?;
            if copied.bytes != f.size {
                return Err(Error::corruption(
                    &from,
                    copied.bytes.min(f.size),
                    format!(
                        "backup file is {} bytes, backup {id} recorded {}",
                        copied.bytes, f.size
                    ),
                ));
            }
            if copied.crc32c != f.crc32c {
                return Err(Error::corruption(
                    &from,
                    0,
                    format!(
                        "backup file's CRC32C is {:08x}, backup {id} recorded {:08x}",
                        copied.crc32c, f.crc32c
                    ),
                ));
            }
        }
        (fs.sync_dir(&tmp)).context(|| format!("syncing directory {}", tmp.display()))?;
        publish_dir(fs, &tmp, dest)?;
        staging.dir = None;
        Ok(())
    }

    /// Deletes backup `id`, then every shared file no remaining backup
    /// lists. [`Error::InvalidArgument`] if there is no such backup.
    pub fn delete(&self, id: BackupId) -> Result<()> {
        let _calls = self.calls.lock();
        self.delete_metas(&[id])
    }

    /// Deletes the oldest backups until at most `keep` remain (then the
    /// shared files no remaining backup lists); returns the ids deleted.
    ///
    /// ```
    /// use weft::{BackupEngine, Db, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    /// let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
    /// for v in ["1", "2", "3"] {
    ///     db.put("k", v).unwrap();
    ///     backups.create_backup(&db).unwrap();
    /// }
    /// assert_eq!(backups.purge_old_backups(1).unwrap(), vec![1, 2]);
    /// let left = backups.list().unwrap();
    /// assert_eq!((left.len(), left[0].id, left[0].sequence), (1, 3, 3));
    /// ```
    pub fn purge_old_backups(&self, keep: usize) -> Result<Vec<BackupId>> {
        let _calls = self.calls.lock();
        let ids = self.ids()?;
        let old = ids[..ids.len().saturating_sub(keep)].to_vec();
        self.delete_metas(&old)?;
        Ok(old)
    }

    /// Removes the meta files of `ids` (durably: a backup never reappears
    /// with files missing), then the shared files none of the rest lists.
    fn delete_metas(&self, ids: &[BackupId]) -> Result<()> {
        for &id in ids {
            let path = self.meta_path(id);
            if !self.fs.exists(&path) {
                return Err(Error::InvalidArgument(format!(
                    "no backup {id} in {}",
                    self.dir.display()
                )));
            }
            (self.fs.remove_file(&path)).context(|| format!("removing {}", path.display()))?;
        }
        let meta = self.meta_dir();
        (self.fs.sync_dir(&meta)).context(|| format!("syncing directory {}", meta.display()))?;
        self.purge_unlisted()
    }

    /// Removes every shared file no backup lists. Reads every meta file
    /// first: one that does not parse stops it (its files may be needed).
    fn purge_unlisted(&self) -> Result<()> {
        let mut listed = BTreeSet::new();
        for id in self.ids()? {
            for f in self.read_meta(id)?.files {
                listed.insert(f.shared_name());
            }
        }
        let shared = self.shared();
        let present =
            (self.fs.read_dir(&shared)).context(|| format!("listing {}", shared.display()))?;
        for path in present {
            if !listed.contains(&file_name(&path)) {
                (self.fs.remove_file(&path)).context(|| format!("removing {}", path.display()))?;
            }
        }
        (self.fs.sync_dir(&shared)).context(|| format!("syncing directory {}", shared.display()))
    }

    /// What an interrupted call left (see [`BackupEngine::open`]).
    fn remove_leftovers(&self) -> Result<()> {
        let meta = self.meta_dir();
        for path in (self.fs.read_dir(&meta)).context(|| format!("listing {}", meta.display()))? {
            if file_name(&path).ends_with(".tmp") {
                let _ = self.fs.remove_file(&path);
            }
        }
        self.purge_unlisted()
    }

    /// The backup directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

/// Stores a backup's files into `shared/`, each unless it is there
/// already, and lists them.
struct Store<'a> {
    fs: &'a dyn FileSystem,
    shared: PathBuf,
    /// The names in `shared/` before this backup.
    present: BTreeSet<String>,
    /// The files this backup copied, removed if it fails.
    copied: Undo<'a>,
    files: Vec<BackupFile>,
    new_files: u64,
    new_bytes: u64,
}

impl Store<'_> {
    /// Stores the first `limit` bytes of `from` (all of it when `None`)
    /// as the file `name`. A file stored already under this name and size
    /// is read once to confirm it by its checksum; any other is copied at
    /// once, its checksum taken as it is.
    fn file(&mut self, name: String, from: &File, limit: Option<u64>) -> Result<()> {
        let size = match limit {
            Some(bytes) => bytes,
            None => (from.metadata())
                .context(|| format!("reading the size of {name}"))?
                .len(),
        };
        let (before, after) = shared_name_around(&name, size);
        let candidate = self.present.iter().any(|p| {
            p.len() == before.len() + 8 + after.len()
                && p.starts_with(&before)
                && p.ends_with(&after)
        });
        if candidate {
            let sum = checksum(from, Some(size)).context(|| format!("reading {name}"))?;
            let file = BackupFile {
                name: name.clone(),
                size,
                crc32c: sum.crc32c,
            };
            if self.present.contains(&file.shared_name()) {
                self.files.push(file);
                return Ok(());
            }
        }
        let tmp = self.shared.join(format!("{name}.tmp"));
        let copied = copy_to_new(self.fs, from, Some(size), &tmp)
            .context(|| format!("copying {name} into {}", tmp.display()))?;
        self.keep(
            tmp,
            BackupFile {
                name,
                size,
                crc32c: copied.crc32c,
            },
        )
    }

    /// Stores `bytes` as the file `name` (the manifest and `CURRENT`,
    /// built in memory).
    fn bytes(&mut self, name: String, bytes: &[u8]) -> Result<()> {
        let file = BackupFile {
            name,
            size: bytes.len() as u64,
            crc32c: crc32c::crc32c(bytes),
        };
        if self.present.contains(&file.shared_name()) {
            self.files.push(file);
            return Ok(());
        }
        let tmp = self.shared.join(format!("{}.tmp", file.name));
        crate::util::fs::write_new_synced(self.fs, &tmp, bytes)
            .context(|| format!("writing {}", tmp.display()))?;
        self.keep(tmp, file)
    }

    /// Renames the fsynced `tmp` to `file`'s shared name and lists it.
    fn keep(&mut self, tmp: PathBuf, file: BackupFile) -> Result<()> {
        let to = self.shared.join(file.shared_name());
        (self.fs.rename(&tmp, &to))
            .context(|| format!("renaming {} to {}", tmp.display(), to.display()))?;
        self.copied.files.push(to);
        self.present.insert(file.shared_name());
        self.new_files += 1;
        self.new_bytes += file.size;
        self.files.push(file);
        Ok(())
    }
}

/// What a call is making, undone when it is dropped: the files in
/// `files` (a backup's copies into `shared/` until its meta file lists
/// them), then the directory `dir` with its files (a restore's staging
/// directory until it is renamed into place).
struct Undo<'a> {
    fs: &'a dyn FileSystem,
    dir: Option<PathBuf>,
    files: Vec<PathBuf>,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = self.fs.remove_file(f);
        }
        if let Some(dir) = &self.dir {
            remove_dir_and_files(self.fs, dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        let files = vec![
            BackupFile {
                name: "000012.sst".into(),
                size: 4096,
                crc32c: 0x1a2b_3c4d,
            },
            BackupFile {
                name: "CURRENT".into(),
                size: 16,
                crc32c: 7,
            },
        ];
        Meta {
            info: BackupInfo {
                id: 3,
                created_unix_secs: 1_700_000_000,
                sequence: 12_345,
                files: 2,
                bytes: 4112,
                new_files: 1,
                new_bytes: 16,
            },
            files,
        }
    }

    #[test]
    fn shared_names_carry_the_checksum_and_size() {
        let m = meta();
        assert_eq!(m.files[0].shared_name(), "000012_1a2b3c4d_4096.sst");
        assert_eq!(m.files[1].shared_name(), "CURRENT_00000007_16");
    }

    #[test]
    fn meta_files_round_trip_and_damage_is_corruption() {
        let m = meta();
        let bytes = m.encode();
        let p = Path::new("meta/3");
        assert_eq!(Meta::decode(p, 3, &bytes).unwrap(), m);
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x01;
            match Meta::decode(p, 3, &bad) {
                Err(Error::Corruption { .. } | Error::Unsupported { .. }) => {}
                other => panic!("byte {at} flipped: {other:?}"),
            }
        }
        assert!(Meta::decode(p, 4, &bytes).is_err(), "another backup's id");
        assert!(Meta::decode(p, 3, &bytes[..bytes.len() - 3]).is_err());
    }

    #[test]
    fn a_meta_file_names_only_database_files() {
        for bad in [
            "../x.sst",
            "LOCK",
            "notes.txt",
            "000001.tmp",
            "a/000001.sst",
        ] {
            let mut m = meta();
            m.files[0].name = bad.into();
            assert!(
                Meta::decode(Path::new("m"), 3, &m.encode()).is_err(),
                "{bad}"
            );
        }
    }
}
