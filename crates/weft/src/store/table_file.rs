//! A table as the store knows it: what the manifest records ([`FileMeta`]),
//! where it lives in its partition ([`Placement`]) and the open file
//! readers share ([`TableFile`]), deleted when the last one drops it after
//! an edit made it obsolete.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::table::BlockCache;
use crate::table::{BlockReads, Table};
use crate::util::fs::Fs;

/// Where a table lives within its partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Flushed from a memtable; overlaps other tables.
    Unsorted,
    /// Part of the partition's sorted run.
    Sorted,
}

/// What the manifest records about a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number (`NNNNNN.sst`).
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Entries in the table.
    pub entries: u64,
    /// Smallest encoded internal key.
    pub smallest: Vec<u8>,
    /// Largest encoded internal key.
    pub largest: Vec<u8>,
}

impl FileMeta {
    /// User key of the smallest entry.
    pub fn smallest_user_key(&self) -> &[u8] {
        crate::key::user_key_of(&self.smallest)
    }
    /// User key of the largest entry.
    pub fn largest_user_key(&self) -> &[u8] {
        crate::key::user_key_of(&self.largest)
    }
}

/// An open table of the current (or an older, still pinned) version.
pub struct TableFile {
    /// Manifest metadata.
    pub meta: FileMeta,
    /// The open table.
    pub table: Arc<Table>,
    path: PathBuf,
    cache: Arc<BlockCache>,
    /// Removes the file once obsolete.
    fs: Fs,
    obsolete: AtomicBool,
}

impl TableFile {
    /// Opens table `meta.number` in `dir`, reading its blocks as `reads`
    /// says.
    pub fn open(
        fs: &Fs,
        dir: &Path,
        meta: FileMeta,
        cache: &Arc<BlockCache>,
        reads: BlockReads,
    ) -> Result<Arc<TableFile>> {
        let path = crate::filename::table_path(dir, meta.number);
        let table = Table::open(
            &**fs,
            &path,
            meta.number,
            meta.size,
            Arc::clone(cache),
            reads,
        )?;
        Ok(Arc::new(TableFile {
            meta,
            table,
            path,
            cache: Arc::clone(cache),
            fs: Arc::clone(fs),
            obsolete: AtomicBool::new(false),
        }))
    }

    /// Marks the table as removed from the live version: its file is deleted
    /// once the last reader lets go.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            self.cache.evict_file(self.meta.number);
            // A failure leaves an orphan that the next open removes.
            let _ = self.fs.remove_file(&self.path);
        }
    }
}
