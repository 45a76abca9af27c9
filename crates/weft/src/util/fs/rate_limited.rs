//! A file system whose new files' appends pass a [`RateLimiter`] first:
//! what the job pool writes its tables and value logs through. Everything
//! else goes straight to the file system underneath.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FileSystem, Fs, WritableFile};
use crate::util::rate_limiter::RateLimiter;

/// `inner`, with the appends to files it creates limited by `limiter`.
#[derive(Debug)]
pub(crate) struct RateLimitedFs {
    inner: Fs,
    limiter: Arc<RateLimiter>,
}

impl RateLimitedFs {
    pub fn new(inner: Fs, limiter: Arc<RateLimiter>) -> RateLimitedFs {
        RateLimitedFs { inner, limiter }
    }
}

impl FileSystem for RateLimitedFs {
    fn create(&self, path: &Path, readable: bool) -> io::Result<Arc<dyn WritableFile>> {
        Ok(Arc::new(RateLimitedFile {
            inner: self.inner.create(path, readable)?,
            limiter: Arc::clone(&self.limiter),
        }))
    }
    fn open(&self, path: &Path) -> io::Result<File> {
        self.inner.open(path)
    }
    fn open_lock_file(&self, path: &Path) -> io::Result<File> {
        self.inner.open_lock_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.hard_link(from, to)
    }
    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.read_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.inner.file_size(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn sync_file(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_file(path)
    }
}

/// A file whose appends wait for the limiter.
#[derive(Debug)]
struct RateLimitedFile {
    inner: Arc<dyn WritableFile>,
    limiter: Arc<RateLimiter>,
}

impl WritableFile for RateLimitedFile {
    fn append(&self, parts: &[&[u8]]) -> io::Result<()> {
        self.limiter
            .request(parts.iter().map(|p| p.len() as u64).sum());
        self.inner.append(parts)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.allocate(offset, len)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn note_mapped_stores(&self, end: u64) {
        self.inner.note_mapped_stores(end)
    }
    fn file(&self) -> &File {
        self.inner.file()
    }
}
