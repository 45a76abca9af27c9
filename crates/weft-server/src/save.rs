//! `SAVE`, `BGSAVE` and `LASTSAVE`: Redis's snapshots, made as engine
//! checkpoints (`weft::Db::checkpoint`).
//!
//! Where Redis writes `dump.rdb`, a save here writes a checkpoint — a
//! directory that `weft serve --dir` (or `weft::Db::open`) opens as the
//! database was at one sequence — into the save directory
//! ([`crate::Config::save_dir`]), named `checkpoint-<unix ms>`. As Redis
//! keeps one dump, a save that succeeds removes the older checkpoints
//! there; until it has succeeded they stay, so the directory always holds
//! a whole one once any save has. A checkpoint shares its tables and logs
//! with the live database through hard links, so a save costs the copy of
//! the WAL tail and a manifest, not the data.
//!
//! `SAVE` runs on the event loop that received it (Redis's blocks the
//! server too) and replies `+OK` when the checkpoint is durable. `BGSAVE`
//! replies `+Background saving started` at once and runs on a thread of its
//! own, which the server joins before it closes the database at shutdown.
//! One save runs at a time; another asked meanwhile gets Redis's
//! `-ERR Background save already in progress`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::keyspace::now_ms;

/// Redis's reply to a save asked while one runs.
pub(crate) const IN_PROGRESS: &str = "ERR Background save already in progress";

/// The prefix of the checkpoints' directory names.
const PREFIX: &str = "checkpoint-";

/// The state of the server's saves (INFO persistence reads it).
#[derive(Debug)]
pub(crate) struct Saves {
    dir: PathBuf,
    running: AtomicBool,
    /// Seconds since the Unix epoch of the last save that succeeded (the
    /// server's start until one has, as Redis's `LASTSAVE` after a start
    /// without a dump).
    last_save: AtomicU64,
    /// Whether the last save succeeded (true until one has failed).
    last_ok: AtomicBool,
    /// The sequence the last successful save stood at.
    last_sequence: AtomicU64,
    /// The background save's thread, joined at shutdown.
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Whose turn it is: held by the one save running, released when dropped.
struct Turn<'a>(&'a AtomicBool);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Saves {
    /// Saves into `dir`; nothing saved yet.
    pub(crate) fn new(dir: PathBuf) -> Saves {
        Saves {
            dir,
            running: AtomicBool::new(false),
            last_save: AtomicU64::new(now_ms() / 1000),
            last_ok: AtomicBool::new(true),
            last_sequence: AtomicU64::new(0),
            thread: Mutex::new(None),
        }
    }

    /// The save directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `LASTSAVE`: seconds since the Unix epoch of the last successful
    /// save (or of the server's start).
    pub fn last_save(&self) -> u64 {
        self.last_save.load(Ordering::Acquire)
    }

    /// Whether a save is running.
    pub fn in_progress(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Whether the last save succeeded.
    pub fn last_ok(&self) -> bool {
        self.last_ok.load(Ordering::Acquire)
    }

    /// The sequence of the last successful save (0 before one).
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence.load(Ordering::Acquire)
    }

    fn take_turn(&self) -> Option<Turn<'_>> {
        self.running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Turn(&self.running))
    }

    /// `SAVE`: a checkpoint of `db`, durable when this returns. `None`
    /// when another save runs.
    pub(crate) fn save(&self, db: &weft::Db) -> Option<Result<PathBuf, weft::Error>> {
        let _turn = self.take_turn()?;
        Some(self.run(db))
    }

    /// `BGSAVE`: starts a checkpoint of `db` on a thread of its own.
    /// `Ok(false)` when another save runs.
    pub(crate) fn start_background(
        self: &Arc<Self>,
        db: &weft::Db,
    ) -> Result<bool, std::io::Error> {
        let taken = self
            .running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire);
        if taken.is_err() {
            return Ok(false);
        }
        // The thread holds the turn: it ends with the thread's save, not
        // with this call.
        let (saves, db) = (Arc::clone(self), db.clone());
        let spawned = std::thread::Builder::new()
            .name("weft-bgsave".into())
            .spawn(move || {
                let _turn = Turn(&saves.running);
                if let Err(e) = saves.run(&db) {
                    eprintln!("weft serve: background save: {e}");
                }
            });
        let mut thread = self.thread.lock();
        match spawned {
            Ok(t) => {
                // The previous save's thread has ended (its turn is over).
                if let Some(done) = thread.replace(t) {
                    let _ = done.join();
                }
                Ok(true)
            }
            Err(e) => {
                self.running.store(false, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Waits for a background save to end (shutdown, before the database
    /// closes).
    pub(crate) fn join(&self) {
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }

    /// Checkpoints `db` into a new directory of the save directory, then
    /// removes the older checkpoints there.
    fn run(&self, db: &weft::Db) -> Result<PathBuf, weft::Error> {
        let mut ms = now_ms();
        let mut dest = self.dir.join(format!("{PREFIX}{ms}"));
        // Saves run one at a time: a name is taken only by an earlier one.
        while dest.exists() {
            ms += 1;
            dest = self.dir.join(format!("{PREFIX}{ms}"));
        }
        let result = db.checkpoint(&dest);
        self.last_ok.store(result.is_ok(), Ordering::Release);
        let info = result?;
        self.last_sequence.store(info.sequence, Ordering::Release);
        self.last_save.store(now_ms() / 1000, Ordering::Release);
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let name = e.file_name();
                let older = name
                    .to_str()
                    .is_some_and(|n| n.starts_with(PREFIX) && e.path() != dest);
                if older {
                    // A failure leaves an older copy behind, nothing worse.
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        Ok(dest)
    }
}

/// The save directory by default: `<DIR>-checkpoints` beside the data
/// directory `data_dir` (beside, not inside: a checkpoint is a database of
/// its own, and copying the data directory copies no checkpoint).
///
/// ```
/// use std::path::Path;
/// let dir = weft_server::default_save_dir(Path::new("/srv/weft-data"));
/// assert_eq!(dir, Path::new("/srv/weft-data-checkpoints"));
/// ```
pub fn default_save_dir(data_dir: &Path) -> PathBuf {
    let mut name = data_dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "weft-data".into());
    name.push("-checkpoints");
    data_dir.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_save_directory_is_beside_the_data_directory() {
        assert_eq!(
            default_save_dir(Path::new("./weft-data")),
            Path::new("./weft-data-checkpoints")
        );
        assert_eq!(
            default_save_dir(Path::new("/srv/db/")),
            Path::new("/srv/db-checkpoints")
        );
    }

    #[test]
    fn a_save_keeps_only_the_newest_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let db = weft::Db::open(dir.path().join("db"), weft::Options::default()).unwrap();
        let saves = Arc::new(Saves::new(dir.path().join("saves")));
        db.put("a", "1").unwrap();
        let first = saves.save(&db).unwrap().unwrap();
        db.put("a", "2").unwrap();
        assert!(saves.start_background(&db).unwrap());
        saves.join();
        assert!(!saves.in_progress() && saves.last_ok());
        let left: Vec<PathBuf> = std::fs::read_dir(saves.dir())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
        assert_ne!(left[0], first);
        assert_eq!(saves.last_sequence(), 2);
        let copy = weft::Db::open(&left[0], weft::Options::default()).unwrap();
        assert_eq!(copy.get("a").unwrap().as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn one_save_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = weft::Db::open(dir.path().join("db"), weft::Options::default()).unwrap();
        let saves = Arc::new(Saves::new(dir.path().join("saves")));
        let turn = saves.take_turn().unwrap();
        assert!(saves.save(&db).is_none());
        assert!(!saves.start_background(&db).unwrap());
        drop(turn);
        assert!(saves.save(&db).unwrap().is_ok());
    }
}
