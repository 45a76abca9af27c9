//! [`RealFs`]: the operating system's file system.

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, IoSlice, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use super::{FileSystem, WritableFile};

/// The operating system's file system: each method is the one system call
/// it names.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

impl RealFs {
    /// Creates (truncating) `path` for writing.
    pub(super) fn create_file(&self, path: &Path, readable: bool) -> io::Result<RealFile> {
        let file = OpenOptions::new()
            .read(readable)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(RealFile { file })
    }
}

impl FileSystem for RealFs {
    fn create(&self, path: &Path, readable: bool) -> io::Result<Arc<dyn WritableFile>> {
        Ok(Arc::new(self.create_file(path, readable)?))
    }

    fn open(&self, path: &Path) -> io::Result<File> {
        File::open(path)
    }

    fn open_lock_file(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// A file of [`RealFs`] open for writing.
#[derive(Debug)]
pub(super) struct RealFile {
    pub(super) file: File,
}

impl WritableFile for RealFile {
    fn append(&self, parts: &[&[u8]]) -> io::Result<()> {
        write_all_vectored(&self.file, parts)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
        else {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        };
        loop {
            // SAFETY: plain syscall on an open descriptor; mode 0 allocates
            // blocks and extends the file size, touching no user memory.
            let r = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, offset, len) };
            if r == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn note_mapped_stores(&self, _end: u64) {}

    fn file(&self) -> &File {
        &self.file
    }
}

/// Writes `parts` fully, with as few system calls as the kernel allows
/// (usually one `writev`), without copying them. Handles short writes and
/// `EINTR` the way `write_all` does.
pub(super) fn write_all_vectored(mut file: &File, parts: &[&[u8]]) -> io::Result<()> {
    let mut part = 0;
    let mut offset = 0;
    while part < parts.len() {
        if offset == parts[part].len() {
            part += 1;
            offset = 0;
            continue;
        }
        let res = if parts.len() - part == 1 {
            file.write(&parts[part][offset..])
        } else {
            // Up to 8 slices per call, on the stack: a WAL record is two
            // parts, and this runs once per record.
            let mut slices = [IoSlice::new(&[]); 8];
            slices[0] = IoSlice::new(&parts[part][offset..]);
            let mut n = 1;
            for p in &parts[part + 1..] {
                if n == slices.len() {
                    break;
                }
                slices[n] = IoSlice::new(p);
                n += 1;
            }
            file.write_vectored(&slices[..n])
        };
        match res {
            Ok(0) => {
                return Err(io::Error::new(
                    ErrorKind::WriteZero,
                    "failed to write whole buffer",
                ))
            }
            Ok(mut n) => {
                while n > 0 {
                    let left = parts[part].len() - offset;
                    if n < left {
                        offset += n;
                        n = 0;
                    } else {
                        n -= left;
                        part += 1;
                        offset = 0;
                    }
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_in_order_across_parts_and_reserves_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = RealFs.create(&path, true).unwrap();
        f.append(&[b"ab", b"", b"cde"]).unwrap();
        f.append(&[b"f"]).unwrap();
        f.sync_data().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abcdef");
        let many: Vec<&[u8]> = vec![b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9"];
        f.append(&many).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abcdef0123456789");
        f.set_len(6).unwrap();
        match f.allocate(6, 4) {
            Ok(()) => assert_eq!(std::fs::read(&path).unwrap(), b"abcdef\0\0\0\0"),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP)),
        }
        f.set_len(3).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
    }
}
