//! File-system helpers whose order of durable steps the crash-safety
//! argument relies on.

use std::fs::File;
use std::io;
use std::path::Path;

/// fsyncs directory `dir`, making the names created or renamed in it
/// durable (a file's own fsync does not cover its directory entry).
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
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
pub(crate) fn write_new_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut f = File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
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
    fn written_file_reads_back_and_directory_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_new_synced(&p, b"abc").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        sync_dir(dir.path()).unwrap();
        assert!(sync_dir(&dir.path().join("missing")).is_err());
    }
}
