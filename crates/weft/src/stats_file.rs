//! The `STATS` file: the lifetime counters ([`crate::LifetimeStats`])
//! carried from one open of a database to the next; and [`Lifetime`], what
//! the engine keeps of them while open (the earlier sessions' counts and
//! the state of the saves: `db::lifetime` adds this session's and saves).
//!
//! ```text
//!  offset  size  field
//!  0       8     magic "WEFTSTAT"
//!  8       1     format version (FORMAT_VERSION, 1)
//!  9       1     flags: bit 0 set when written by a clean close
//!  10      ..    varint64 n, then n entries: bytes name | varint64 value
//!  end−4   4     masked CRC32C (§2.1) of every byte before it
//! ```
//!
//! Counters are stored by name, not by position, so a build can add or
//! drop a counter without a version bump: a name this build does not know
//! is carried forward unchanged, a name it knows and does not find reads
//! as 0. Names are UTF-8, 1 to [`MAX_NAME`] bytes, each at most once.
//!
//! The file is replaced whole and atomically: written to `STATS.tmp`,
//! fsynced, renamed over `STATS`, and at a clean close the directory is
//! fsynced too. A crash therefore leaves the old file or the new one, never
//! a mix; a torn `STATS.tmp` is never read, and the next open removes it.
//! The counters are statistics, not data: a file that is missing, unreadable
//! or damaged only restarts them (the open says so in
//! [`crate::LifetimeStats::restart_reason`]), it never fails an open.
//!
//! Why a file of its own and not a manifest record: the counters change
//! all the time while the manifest changes only with jobs, so a record would
//! either lag far behind or add manifest appends (an fdatasync each) that
//! no state change asks for; a damaged manifest record is corruption that
//! stops the open, where damaged statistics must not; and a new edit tag is
//! a store-format bump (§3) that every older build would refuse.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::{IoContext, Result};
use crate::filename;
use crate::stats::LifetimeStats;
use crate::util::coding::{get_varint64, put_varint64};
use crate::util::crc::masked_crc32c;
use crate::util::fs::{write_new_synced, FileSystem};

const MAGIC: &[u8; 8] = b"WEFTSTAT";
/// The layout's version. Adding or removing counters does not change it.
pub(crate) const FORMAT_VERSION: u8 = 1;
/// Longest counter name accepted.
pub(crate) const MAX_NAME: usize = 255;
/// Flag bit: the file was written by a clean close.
const FLAG_CLEAN: u8 = 1;
/// Magic, version, flags.
const HEADER: usize = 10;
const CRC: usize = 4;

/// The content of a `STATS` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatsFile {
    /// Written by a clean close (`Db::close` or the last clone's drop),
    /// not by a save at open or a periodic one: a file found without it
    /// means the session that wrote it ended in a crash.
    pub clean: bool,
    /// Every counter, by name.
    pub counts: BTreeMap<String, u64>,
}

impl StatsFile {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + 8 + self.counts.len() * 24 + CRC);
        out.extend_from_slice(MAGIC);
        out.push(FORMAT_VERSION);
        out.push(if self.clean { FLAG_CLEAN } else { 0 });
        put_varint64(&mut out, self.counts.len() as u64);
        for (name, value) in &self.counts {
            put_varint64(&mut out, name.len() as u64);
            out.extend_from_slice(name.as_bytes());
            put_varint64(&mut out, *value);
        }
        let crc = masked_crc32c(&[&out]);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a file's bytes; `Err` says what is wrong, and where.
    pub fn decode(bytes: &[u8]) -> std::result::Result<StatsFile, String> {
        if bytes.len() < HEADER + 1 + CRC {
            return Err(format!(
                "{} bytes, shorter than the smallest valid file",
                bytes.len()
            ));
        }
        let (body, stored) = bytes.split_at(bytes.len() - CRC);
        let mut crc = [0u8; CRC];
        crc.copy_from_slice(stored);
        if u32::from_le_bytes(crc) != masked_crc32c(&[body]) {
            return Err(format!(
                "checksum mismatch over its {} bytes (torn or damaged)",
                body.len()
            ));
        }
        if &body[..8] != MAGIC {
            return Err("bad magic (not a STATS file)".into());
        }
        if body[8] != FORMAT_VERSION {
            return Err(format!(
                "format version {} (this build reads version {FORMAT_VERSION})",
                body[8]
            ));
        }
        let clean = body[9] & FLAG_CLEAN != 0;
        let bad = |pos: usize, what: &str| Err(format!("{what} at offset {pos}"));
        let Some((n, mut pos)) = get_varint64(body, HEADER) else {
            return bad(HEADER, "bad counter count");
        };
        let mut counts = BTreeMap::new();
        for _ in 0..n {
            // Each entry takes at least three bytes: a count past what the
            // body can hold fails here, before any allocation it asked for.
            let Some((len, p)) = get_varint64(body, pos) else {
                return bad(pos, "bad name length");
            };
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            if len == 0 || len > MAX_NAME || body.len() - p < len {
                return bad(pos, "name length out of range");
            }
            let Ok(name) = std::str::from_utf8(&body[p..p + len]) else {
                return bad(p, "name is not UTF-8");
            };
            let Some((value, next)) = get_varint64(body, p + len) else {
                return bad(p + len, "bad counter value");
            };
            if counts.insert(name.to_string(), value).is_some() {
                return bad(p, &format!("counter {name:?} stored twice"));
            }
            pos = next;
        }
        if pos != body.len() {
            return bad(pos, "trailing bytes after the counters");
        }
        Ok(StatsFile { clean, counts })
    }
}

/// What an open found in `STATS`.
#[derive(Debug)]
pub(crate) enum Loaded {
    /// No file.
    Missing,
    /// A file that verified.
    Found(StatsFile),
    /// A file that could not be read or did not verify, and why.
    Unusable(String),
}

/// Reads `dir`'s `STATS`. Never fails: an unreadable file is
/// [`Loaded::Unusable`], with the reason.
pub(crate) fn load(fs: &dyn FileSystem, dir: &Path) -> Loaded {
    let path = filename::stats_path(dir);
    match fs.read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Loaded::Missing,
        Err(e) => Loaded::Unusable(format!("reading {}: {e}", path.display())),
        Ok(bytes) => match StatsFile::decode(&bytes) {
            Ok(file) => Loaded::Found(file),
            Err(why) => Loaded::Unusable(format!("{}: {why}", path.display())),
        },
    }
}

/// Replaces `dir`'s `STATS` with `file`: `STATS.tmp` written and fsynced,
/// then renamed over `STATS`; with `durable_name`, the directory is
/// fsynced after, so that the rename itself survives a machine crash (a
/// crash before that leaves the previous file, which is whole too).
pub(crate) fn save(
    fs: &dyn FileSystem,
    dir: &Path,
    file: &StatsFile,
    durable_name: bool,
) -> Result<()> {
    let tmp = filename::stats_temp_path(dir);
    let path = filename::stats_path(dir);
    write_new_synced(fs, &tmp, &file.encode()).context(|| format!("writing {}", tmp.display()))?;
    fs.rename(&tmp, &path)
        .context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    if durable_name {
        fs.sync_dir(dir)
            .context(|| format!("syncing directory {}", dir.display()))?;
    }
    Ok(())
}

/// The earlier sessions' counts and the state of the saves: what the
/// engine holds of the lifetime counters (`Core::lifetime`; `db::lifetime`
/// adds this session's and saves them).
pub(crate) struct Lifetime {
    /// Every earlier session's counts, with this open counted in `opens`
    /// (and in `restarts` or `unclean_closes` when it found so), by name,
    /// names this build does not know included: they are written back
    /// unchanged.
    pub base: BTreeMap<String, u64>,
    /// Why this open started the counters again, if it did.
    pub restart_reason: Option<String>,
    /// The counts the last successful save wrote (so an interval with
    /// nothing new writes nothing). Held through a save, fsync included:
    /// saves are ordered, a later one never writes smaller counts than an
    /// earlier one, and they share the temporary file's name. Taken alone.
    pub written: Mutex<Option<BTreeMap<String, u64>>>,
    /// When the last save was tried (`None` before the first); a leaf,
    /// read by the flush thread under the state lock.
    pub last_save: Mutex<Option<Instant>>,
    /// The last save's error, if it failed; a leaf, read by `Db::stats`.
    pub save_error: Mutex<Option<String>>,
}

impl Lifetime {
    /// The counters as this open starts them, from what it found in
    /// `STATS`; `existing` when the directory held a database before (a
    /// new database has no file, and starts from zero with nothing to
    /// report).
    pub fn at_open(found: Loaded, existing: bool) -> Lifetime {
        let (mut base, restart_reason, unclean) = match found {
            Loaded::Found(file) => (file.counts, None, !file.clean),
            Loaded::Missing if !existing => (BTreeMap::new(), None, false),
            Loaded::Missing => (
                BTreeMap::new(),
                Some(
                    "no STATS file in an existing database (written by a build without \
                     lifetime counters, or removed): the lifetime counters start at this open"
                        .to_string(),
                ),
                false,
            ),
            Loaded::Unusable(why) => (
                BTreeMap::new(),
                Some(format!(
                    "{why}: the lifetime counters start again at this open"
                )),
                false,
            ),
        };
        let mut bump = |name: &str| {
            let v = base.entry(name.to_string()).or_insert(0);
            *v = v.saturating_add(1);
        };
        bump("opens");
        if unclean {
            bump("unclean_closes");
        }
        if restart_reason.is_some() {
            bump("restarts");
        }
        Lifetime {
            base,
            restart_reason,
            written: Mutex::default(),
            last_save: Mutex::default(),
            save_error: Mutex::default(),
        }
    }

    /// The earlier sessions' counts plus `session`'s, by name.
    pub fn counts_with(&self, session: &LifetimeStats) -> BTreeMap<String, u64> {
        let mut counts = self.base.clone();
        for (name, v) in session.to_counts() {
            let c = counts.entry(name).or_insert(0);
            *c = c.saturating_add(v);
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StatsFile {
        let mut counts = BTreeMap::new();
        counts.insert("flushes".to_string(), 3);
        counts.insert("user_bytes_written".to_string(), u64::MAX);
        counts.insert("a counter from a newer build".to_string(), 0);
        StatsFile {
            clean: true,
            counts,
        }
    }

    #[test]
    fn round_trips() {
        for file in [sample(), StatsFile::default()] {
            let bytes = file.encode();
            assert_eq!(StatsFile::decode(&bytes).unwrap(), file);
        }
    }

    #[test]
    fn every_truncation_and_flipped_bit_is_refused() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            assert!(StatsFile::decode(&bytes[..n]).is_err(), "truncated to {n}");
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(StatsFile::decode(&b).is_err(), "byte {i} bit {bit}");
            }
        }
    }

    /// Structure checks behind a valid checksum.
    #[test]
    fn malformed_bodies_are_refused_behind_a_valid_checksum() {
        let seal = |body: &[u8]| {
            let mut b = body.to_vec();
            b.extend_from_slice(&masked_crc32c(&[body]).to_le_bytes());
            b
        };
        let header = |count: &[u8]| {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&[FORMAT_VERSION, 0]);
            b.extend_from_slice(count);
            b
        };
        // A count far past what the bytes hold.
        let huge = header(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert!(StatsFile::decode(&seal(&huge)).is_err());
        // A duplicate name.
        let mut dup = header(&[2]);
        dup.extend_from_slice(&[1, b'x', 1, 1, b'x', 2]);
        let err = StatsFile::decode(&seal(&dup)).unwrap_err();
        assert!(err.contains("twice"), "{err}");
        // An empty name, a name that is not UTF-8, a newer version.
        let mut empty = header(&[1]);
        empty.extend_from_slice(&[0, 1]);
        assert!(StatsFile::decode(&seal(&empty)).is_err());
        let mut latin = header(&[1]);
        latin.extend_from_slice(&[1, 0xff, 1]);
        assert!(StatsFile::decode(&seal(&latin)).is_err());
        let mut newer = sample().encode();
        newer.truncate(newer.len() - CRC);
        newer[8] = FORMAT_VERSION + 1;
        let err = StatsFile::decode(&seal(&newer)).unwrap_err();
        assert!(err.contains("version"), "{err}");
        // Trailing bytes.
        let mut trailing = sample().encode();
        trailing.truncate(trailing.len() - CRC);
        trailing.push(0);
        assert!(StatsFile::decode(&seal(&trailing)).is_err());
    }

    #[test]
    fn save_replaces_the_file_and_load_reports_what_it_found() {
        let fs = crate::util::fs::real();
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(load(&*fs, dir.path()), Loaded::Missing));
        save(&*fs, dir.path(), &sample(), true).unwrap();
        assert!(!filename::stats_temp_path(dir.path()).exists());
        match load(&*fs, dir.path()) {
            Loaded::Found(f) => assert_eq!(f, sample()),
            other => panic!("{other:?}"),
        }
        std::fs::write(filename::stats_path(dir.path()), b"garbage").unwrap();
        assert!(matches!(load(&*fs, dir.path()), Loaded::Unusable(_)));
    }
}
