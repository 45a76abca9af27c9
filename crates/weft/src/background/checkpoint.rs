//! Index checkpoint (UniKV §III-G): a partition's hash index written to a
//! file and recorded in the manifest, so an open loads it and replays only
//! the tables flushed since, instead of rebuilding it from every
//! UnsortedStore table.

use std::sync::Arc;

use super::commit::{commit_edit, NewFiles};
use crate::db::core::{Core, Counters};
use crate::error::Result;
use crate::manifest::VersionEdit;

/// Writes partition `pid`'s hash index to a new checkpoint file and records
/// it in the manifest; the previous checkpoint is then deleted. Failing to
/// write the file only loses an optimisation (open rebuilds from the
/// tables); failing to record it poisons, as any manifest failure does.
pub(super) fn checkpoint_index(core: &Arc<Core>, pid: u64) -> Result<()> {
    let index = {
        let st = core.state.lock();
        match st.version.partition(pid) {
            Some(p) => Arc::clone(&p.index),
            None => return Ok(()),
        }
    };
    // A consistent image (one loaded index) is all recovery needs: it
    // drops entries of tables no longer live and adds the tables missing.
    let image = index.load_full().encode();
    let number = core.state.lock().new_file_number();
    let mut new_files = NewFiles::new(&core.fs, &core.dir);
    let path = new_files.add_index_checkpoint(number);
    let written = crate::util::fs::write_new_synced(&*core.fs, &path, &image);
    if written.is_err() {
        // `new_files` deletes what was written of it.
        return Ok(());
    }
    Counters::add(&core.counters.checkpoint_bytes, image.len() as u64);
    crate::fault::crash_point("checkpoint.file_written");
    // No version changes: readers never see checkpoints.
    let replaced = commit_edit(
        core,
        new_files,
        None,
        |st| {
            let edit = VersionEdit {
                next_file_number: Some(st.next_file_number),
                index_checkpoints: vec![(pid, number)],
                ..Default::default()
            };
            Some((edit, ()))
        },
        |st, ()| {
            st.flushed_since_checkpoint.insert(pid, 0);
            st.index_checkpoints.insert(pid, number)
        },
    )?;
    if let Some(old) = replaced.flatten() {
        let _ = core
            .fs
            .remove_file(&crate::filename::index_checkpoint_path(&core.dir, old));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::commit::failing_appends;
    use super::super::test_support::*;
    use crate::{Db, Options};

    fn options() -> Options {
        Options::default().unsorted_limit(1 << 20)
    }

    fn flush_round(db: &Db, round: u32, keys: u32) {
        for i in 0..keys {
            db.put(key(i), value(round, i, 100)).unwrap();
        }
        db.flush().unwrap();
    }

    /// A checkpoint is written once half `unsorted_limit` has been flushed
    /// into a partition since the last one, and each one replaces (deletes)
    /// the one before; an open restores from it.
    #[test]
    fn each_checkpoint_replaces_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        // Each flush passes half the limit; checkpoints follow the flush's
        // install, which is all `flush` waits for.
        flush_round(&db, 1, 5000);
        wait_until("a checkpoint is written", || {
            files_named(dir.path(), "hix").len() == 1
        });
        let first = files_named(dir.path(), "hix");
        flush_round(&db, 2, 5000);
        wait_until("a second checkpoint replaces the first", || {
            let now = files_named(dir.path(), "hix");
            now.len() == 1 && now != first
        });
        drop(db);
        let db = Db::open(dir.path(), options()).unwrap();
        assert_every_key_reads(&db, 5000, |i| value(2, i, 100));
    }

    /// A checkpoint whose manifest append fails poisons the database and
    /// leaves no checkpoint file behind; the flush before it stays.
    #[test]
    fn a_checkpoint_whose_commit_fails_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        // One flush passes half the limit (a checkpoint is due) but not the
        // limit (no merge runs beside it).
        let opts = options().unsorted_limit(100 << 10);
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let armed = failing_appends::arm(dir.path(), |e| !e.index_checkpoints.is_empty());
        for i in 0..600 {
            db.put(key(i), value(0, i, 100)).unwrap();
        }
        // The flush itself is installed before its checkpoint fails.
        let _ = db.flush();
        wait_until("the failed checkpoint poisons", || {
            db.put(b"k", b"v").is_err()
        });
        assert_eq!(db.stats().flushes, 1, "{:?}", db.stats());
        assert_eq!(files_named(dir.path(), "hix"), Vec::<String>::new());
        drop(db);
        drop(armed);
        let db = Db::open(dir.path(), opts).unwrap();
        assert_every_key_reads(&db, 600, |i| value(0, i, 100));
    }
}
