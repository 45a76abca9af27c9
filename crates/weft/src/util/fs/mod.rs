//! The file-system layer: every file operation of the engine goes through a
//! [`FileSystem`] (LevelDB's `Env`, RocksDB's `FileSystem`), so a test can
//! put a fault-injecting one ([`FaultFs`]) under a whole database — failing
//! the Nth write, sync, rename, create or remove, or cutting the power —
//! and the code that runs is the code users run.
//!
//! # What goes through the layer, and what cannot
//!
//! Everything that changes a file or a directory: creating, appending,
//! reserving blocks, cutting, fsync, fdatasync, renaming, hard links,
//! removing files and empty directories, directory fsync, and the lock
//! file. Reads open a plain [`File`] through
//! the layer and then read it directly (`pread`, or a read-only mapping):
//! reading cannot lose data, and a simulated power cut changes files only
//! after the database is closed.
//!
//! One kind of write bypasses any trait over `write`: the WAL's stores into
//! a shared mapping (`wal::mapped`). The layer still sees everything that
//! decides what survives a power cut — the blocks reserved
//! ([`WritableFile::allocate`]), the file cut back ([`WritableFile::set_len`]),
//! each sync — and the appender reports how far its stores reach
//! ([`WritableFile::note_mapped_stores`]), so a sync covers exactly the bytes
//! stored before it, and a power cut drops (or tears) every byte stored
//! after the last sync, as it does for appended files. The crash test runs
//! with the mapped WAL on, so it is what is tested.
//!
//! # Why not `std::fs` plus a test hook per call
//!
//! A hook per call site is a promise that every new call site remembers
//! it; a trait makes the compiler keep it. `tests/layering.rs` checks that
//! no module outside this one names `std::fs::File::create`, `OpenOptions`
//! or the other mutating calls.

mod fault;
mod rate_limited;
mod real;

use std::fmt::Debug;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub(crate) use fault::activity;
pub use fault::{FaultFs, FaultKind, OpKind, PowerCut, PowerLoss};
pub(crate) use rate_limited::RateLimitedFs;
pub use real::RealFs;

/// The file system a database runs on; see the module docs.
///
/// Every method is a single durable-or-not step whose failure is an
/// `io::Error`; paths are absolute or relative to the process's working
/// directory, as for `std::fs`.
pub trait FileSystem: Debug + Send + Sync {
    /// Creates `path` for writing (truncating it if it exists); appends
    /// start at offset 0. `readable` opens it for reading too (a mapping
    /// needs it).
    fn create(&self, path: &Path, readable: bool) -> io::Result<Arc<dyn WritableFile>>;

    /// Opens `path` read-only.
    fn open(&self, path: &Path) -> io::Result<File>;

    /// Opens (creating it if missing, never truncating) the lock file at
    /// `path`, for `flock`.
    fn open_lock_file(&self, path: &Path) -> io::Result<File>;

    /// Renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes the file at `path`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Creates directory `path` and any missing parent.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Makes `to` a second name of the file at `from` (a hard link): the
    /// same bytes, with no copy. Fails with `EXDEV` across file systems,
    /// and with some error wherever the file system has no hard links;
    /// callers then copy (a checkpoint, `db::checkpoint`). Like a create,
    /// the new name is durable only once its directory is fsynced.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes the empty directory `path`.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;

    /// fsyncs directory `dir`, making the names created, renamed or
    /// removed in it durable (a file's own fsync does not cover its
    /// directory entry).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// The paths of the entries of directory `dir`.
    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        std::fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.path()))
            .collect()
    }

    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    /// The size of the file at `path`.
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(path)?.len())
    }

    /// fdatasyncs the existing file at `path`, written by an earlier
    /// handle (or an earlier process): what recovery keeps of a WAL it
    /// replayed must be durable before a manifest edit names it.
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.open(path)?.sync_data()
    }

    /// The whole content of the file at `path`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        use std::io::Read;
        let mut bytes = Vec::new();
        self.open(path)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// A file being written, made by [`FileSystem::create`]. Shared (`&self`)
/// so that one handle can fdatasync while another appends: a sync through
/// any handle covers every byte written before it.
pub trait WritableFile: Debug + Send + Sync {
    /// Appends `parts`, one after the other, in full (short writes and
    /// `EINTR` are retried inside). On an error, a prefix of them may be
    /// in the file.
    fn append(&self, parts: &[&[u8]]) -> io::Result<()>;

    /// fdatasync: the bytes written so far survive a machine crash.
    fn sync_data(&self) -> io::Result<()>;

    /// fsync: as [`WritableFile::sync_data`], metadata included.
    fn sync_all(&self) -> io::Result<()>;

    /// Reserves blocks for bytes `[offset, offset + len)` and grows the file
    /// to cover them (`fallocate` mode 0); they read as zeros. Fails with
    /// `EOPNOTSUPP` where the file system cannot reserve blocks.
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()>;

    /// Cuts (or extends) the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Reports that stores through a shared mapping of this file reach
    /// offset `end`: a later sync covers them. Only the WAL's mapped
    /// appender stores through a mapping; see the module docs.
    fn note_mapped_stores(&self, end: u64);

    /// The open file, for mapping it (stores through the mapping are
    /// reported with [`WritableFile::note_mapped_stores`]). Not for writes.
    fn file(&self) -> &File;
}

/// How the engine holds its file system.
pub(crate) type Fs = Arc<dyn FileSystem>;

/// The real file system, shared by every database that was not given
/// another one.
pub fn real() -> Arc<dyn FileSystem> {
    static REAL: OnceLock<Arc<dyn FileSystem>> = OnceLock::new();
    Arc::clone(REAL.get_or_init(|| Arc::new(RealFs)))
}

/// [`WritableFile`] as `io::Write`, for a `BufWriter` in front of it
/// (tables and value logs are written in large buffered appends).
pub(crate) struct FileWriter(pub(crate) Arc<dyn WritableFile>);

impl io::Write for FileWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.append(&[buf])?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.append(&[buf])
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The directory holding `path` (`.` for a bare name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The last component of `path`, for error messages.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Writes `bytes` to a new file at `path` and fsyncs it. The caller makes
/// the name durable (or names it in a synced manifest edit) as its order
/// of steps requires.
pub(crate) fn write_new_synced(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let f = fs.create(path, false)?;
    f.append(&[bytes])?;
    f.sync_all()
}

/// Bytes a copy moves per read and append: large enough that the system
/// calls cost little beside the bytes, small enough to stay in cache.
const COPY_CHUNK: usize = 1 << 20;

/// What [`copy_to_new`] copied or [`checksum`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Copied {
    /// Bytes read (and, for a copy, written).
    pub bytes: u64,
    /// Their CRC32C, unmasked.
    pub crc32c: u32,
}

/// Reads `from` from offset 0, `limit` bytes (all of it when `None`),
/// handing each chunk to `sink`; a file shorter than `limit` is
/// `UnexpectedEof`. Reads go to the open file directly, as every read of
/// the engine does (§5.13 of the design): what must not vanish is held
/// open by the caller, whatever happens to its name meanwhile.
fn read_chunks(
    from: &File,
    limit: Option<u64>,
    mut sink: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<Copied> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut done = Copied {
        bytes: 0,
        crc32c: 0,
    };
    loop {
        let want = match limit {
            Some(l) => (l - done.bytes).min(COPY_CHUNK as u64) as usize,
            None => COPY_CHUNK,
        };
        if want == 0 {
            return Ok(done);
        }
        let n = match from.read_at(&mut buf[..want], done.bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            if limit.is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the file ends at byte {} of the {} to copy",
                        done.bytes, want
                    ),
                ));
            }
            return Ok(done);
        }
        sink(&buf[..n])?;
        done.crc32c = crc32c::crc32c_append(done.crc32c, &buf[..n]);
        done.bytes += n as u64;
    }
}

/// Copies the first `limit` bytes of `from` (all of it when `None`) into a
/// new file at `to`, fsyncs it, and returns what it copied with its
/// CRC32C. The caller makes the name durable (a directory fsync), as for
/// [`write_new_synced`].
pub(crate) fn copy_to_new(
    fs: &dyn FileSystem,
    from: &File,
    limit: Option<u64>,
    to: &Path,
) -> io::Result<Copied> {
    let out = fs.create(to, false)?;
    let copied = read_chunks(from, limit, |chunk| out.append(&[chunk]))?;
    out.sync_all()?;
    Ok(copied)
}

/// The length and CRC32C of the first `limit` bytes of `from` (all of it
/// when `None`).
pub(crate) fn checksum(from: &File, limit: Option<u64>) -> io::Result<Copied> {
    read_chunks(from, limit, |_| Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_a_bare_name_is_the_current_directory() {
        assert_eq!(parent_dir(Path::new("x.log")), Path::new("."));
        assert_eq!(parent_dir(Path::new("d/x.log")), Path::new("d"));
        assert_eq!(file_name(Path::new("d/x.log")), "x.log");
    }

    #[test]
    fn copies_a_prefix_or_all_with_its_checksum() {
        let fs = real();
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let bytes: Vec<u8> = (0..3 * COPY_CHUNK + 17).map(|i| (i % 251) as u8).collect();
        write_new_synced(&*fs, &src, &bytes).unwrap();
        let from = fs.open(&src).unwrap();
        let all = copy_to_new(&*fs, &from, None, &dir.path().join("all")).unwrap();
        assert_eq!(all.bytes, bytes.len() as u64);
        assert_eq!(all.crc32c, crc32c::crc32c(&bytes));
        assert_eq!(fs.read(&dir.path().join("all")).unwrap(), bytes);
        let part = copy_to_new(&*fs, &from, Some(1000), &dir.path().join("part")).unwrap();
        assert_eq!(part.crc32c, crc32c::crc32c(&bytes[..1000]));
        assert_eq!(fs.read(&dir.path().join("part")).unwrap(), &bytes[..1000]);
        assert_eq!(checksum(&from, None).unwrap(), all);
        assert_eq!(checksum(&from, Some(1000)).unwrap(), part);
        let past = bytes.len() as u64 + 1;
        let e = copy_to_new(&*fs, &from, Some(past), &dir.path().join("x")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn hard_links_share_the_bytes_and_empty_directories_go() {
        let fs = real();
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        write_new_synced(&*fs, &a, b"abc").unwrap();
        let sub = dir.path().join("sub");
        fs.create_dir_all(&sub).unwrap();
        fs.hard_link(&a, &sub.join("b")).unwrap();
        fs.remove_file(&a).unwrap();
        assert_eq!(fs.read(&sub.join("b")).unwrap(), b"abc");
        assert!(fs.remove_dir(&sub).is_err(), "not empty");
        fs.remove_file(&sub.join("b")).unwrap();
        fs.remove_dir(&sub).unwrap();
        assert!(!fs.exists(&sub));
    }

    #[test]
    fn written_file_reads_back_and_directory_syncs() {
        let fs = real();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_new_synced(&*fs, &p, b"abc").unwrap();
        assert_eq!(fs.read(&p).unwrap(), b"abc");
        fs.sync_dir(dir.path()).unwrap();
        assert!(fs.sync_dir(&dir.path().join("missing")).is_err());
    }
}
