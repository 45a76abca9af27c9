//! Positional reads into fresh buffers that are not zeroed first.
//!
//! Every table block and separated value read from disk lands in a buffer
//! allocated for exactly that read. Zero-filling it before the kernel
//! overwrites every byte showed in a read-heavy profile (`memset`), so the
//! read goes straight into the vector's spare capacity and the length grows
//! by what the kernel wrote.

use std::fs::File;
use std::io::{Error, ErrorKind, Result};
use std::os::fd::AsRawFd;

/// Reads exactly `len` bytes of `file` at `offset` into a new vector.
/// A file that ends first is `ErrorKind::UnexpectedEof`, as
/// `FileExt::read_exact_at`.
pub fn read_exact_at(file: &File, len: usize, offset: u64) -> Result<Vec<u8>> {
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    while buf.len() < len {
        let at = offset
            .checked_add(buf.len() as u64)
            .and_then(|o| libc::off_t::try_from(o).ok())
            .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "read offset out of range"))?;
        let want = len - buf.len();
        let spare = buf.spare_capacity_mut();
        debug_assert!(spare.len() >= want);
        // SAFETY: `spare` is memory owned by `buf`, writable and at least
        // `want` bytes long (capacity is `len`, `buf.len() + want == len`);
        // pread writes at most `want` bytes there and reads none; the
        // descriptor is borrowed from `file`, open for the whole call.
        let n = unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), want, at) };
        match n {
            n if n < 0 => {
                let e = Error::last_os_error();
                if e.kind() != ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            0 => {
                return Err(Error::new(
                    ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ))
            }
            n => {
                let n = n as usize;
                assert!(n <= want, "pread wrote more than it was given");
                // SAFETY: the kernel initialised the first `n` bytes of the
                // spare capacity, and `buf.len() + n <= len <= capacity`.
                unsafe { buf.set_len(buf.len() + n) };
            }
        }
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_exactly_and_reports_a_short_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let f = File::open(&path).unwrap();
        for (off, len) in [
            (0usize, 0usize),
            (0, 1),
            (5, 4096),
            (99_000, 1000),
            (1, 99_999),
        ] {
            assert_eq!(
                read_exact_at(&f, len, off as u64).unwrap(),
                &data[off..off + len]
            );
        }
        let e = read_exact_at(&f, 10, 99_995).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
        let e = read_exact_at(&f, 10, u64::MAX - 3).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    }
}
