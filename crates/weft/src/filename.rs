//! Names of the files in a database directory.
//!
//! ```text
//! LOCK                 held with flock while a Db is open
//! CURRENT              name of the live manifest, replaced atomically by rename
//! MANIFEST-NNNNNN      log of version edits
//! NNNNNN.log           write-ahead log, one per memtable
//! NNNNNN.sst           table (UnsortedStore or SortedStore)
//! NNNNNN.vlog          value log (values separated from SortedStore keys)
//! NNNNNN.hix           checkpoint of a partition's hash index
//! NNNNNN.tmp           a file being written; removed at open
//! STATS                lifetime counters (`stats_file`), replaced atomically
//! STATS.tmp            the next STATS being written; removed at open
//! ```
//! All numbers come from one counter persisted in the manifest.

use std::path::{Path, PathBuf};

/// Numbers Weft hands out stay below this: far more files than any
/// database makes in its life (a million a second for two thousand years),
/// and far from `u64::MAX`, so numbering never wraps. A file whose number
/// is past it was not written by Weft.
pub const MAX_FILE_NUMBER: u64 = 1 << 56;

/// What a file in the database directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// The LOCK file.
    Lock,
    /// The CURRENT pointer.
    Current,
    /// A manifest log.
    Manifest(u64),
    /// A write-ahead log.
    Wal(u64),
    /// A table.
    Table(u64),
    /// A value log.
    ValueLog(u64),
    /// A hash-index checkpoint.
    IndexCheckpoint(u64),
    /// A temporary file.
    Temp(u64),
    /// The lifetime counters (`STATS`).
    Stats,
    /// The next `STATS` being written (`STATS.tmp`).
    StatsTemp,
}

/// Path of the LOCK file.
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}
/// Path of CURRENT.
pub fn current_path(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}
/// File name (not path) of manifest `n`.
pub fn manifest_name(n: u64) -> String {
    format!("MANIFEST-{n:06}")
}
/// Path of manifest `n`.
pub fn manifest_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(manifest_name(n))
}
/// Path of WAL `n`.
pub fn wal_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.log"))
}
/// Path of table `n`.
pub fn table_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.sst"))
}
/// Path of value log `n`.
pub fn value_log_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.vlog"))
}
/// Path of hash-index checkpoint `n`.
pub fn index_checkpoint_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.hix"))
}
/// Path of the lifetime counters' file.
pub fn stats_path(dir: &Path) -> PathBuf {
    dir.join("STATS")
}
/// Path the next lifetime counters' file is written to before its rename.
pub fn stats_temp_path(dir: &Path) -> PathBuf {
    dir.join("STATS.tmp")
}
/// Path of temporary file `n`.
#[cfg(test)]
pub fn temp_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:06}.tmp"))
}

/// Classifies a file name found in the directory; `None` for foreign files.
pub fn parse_file_name(name: &str) -> Option<FileKind> {
    match name {
        "LOCK" => return Some(FileKind::Lock),
        "CURRENT" => return Some(FileKind::Current),
        "STATS" => return Some(FileKind::Stats),
        "STATS.tmp" => return Some(FileKind::StatsTemp),
        _ => {}
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(FileKind::Manifest);
    }
    let (stem, ext) = name.rsplit_once('.')?;
    let n: u64 = stem.parse().ok()?;
    match ext {
        "log" => Some(FileKind::Wal(n)),
        "sst" => Some(FileKind::Table(n)),
        "vlog" => Some(FileKind::ValueLog(n)),
        "hix" => Some(FileKind::IndexCheckpoint(n)),
        "tmp" => Some(FileKind::Temp(n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/x");
        for (p, k) in [
            (wal_path(d, 7), FileKind::Wal(7)),
            (table_path(d, 1234567), FileKind::Table(1234567)),
            (manifest_path(d, 3), FileKind::Manifest(3)),
            (temp_path(d, 9), FileKind::Temp(9)),
            (value_log_path(d, 11), FileKind::ValueLog(11)),
            (index_checkpoint_path(d, 12), FileKind::IndexCheckpoint(12)),
        ] {
            let name = p.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse_file_name(name), Some(k));
        }
        assert_eq!(parse_file_name("notes.txt"), None);
        for (p, k) in [
            (stats_path(d), FileKind::Stats),
            (stats_temp_path(d), FileKind::StatsTemp),
        ] {
            let name = p.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse_file_name(name), Some(k));
        }
    }
}
