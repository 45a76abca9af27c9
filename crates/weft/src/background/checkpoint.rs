//! Index checkpoint (UniKV §III-G): a partition's hash index written to a
//! file and recorded in the manifest, so an open loads it and replays only
//! the tables flushed since, instead of rebuilding it from every
//! UnsortedStore table.

use std::sync::Arc;

use super::commit::{commit_edit, NewFiles};
use crate::db::core::Core;
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
    // A consistent image (under the read lock) is all recovery needs: it
    // drops entries of tables no longer live and adds the tables missing.
    let image = index.read().encode();
    let number = core.state.lock().new_file_number();
    let mut new_files = NewFiles::new(&core.dir);
    let path = new_files.add_index_checkpoint(number);
    let written = std::fs::File::create(&path).and_then(|mut f| {
        use std::io::Write;
        f.write_all(&image)?;
        f.sync_all()
    });
    if written.is_err() {
        // `new_files` deletes what was written of it.
        return Ok(());
    }
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
        let _ = std::fs::remove_file(crate::filename::index_checkpoint_path(&core.dir, old));
    }
    Ok(())
}
