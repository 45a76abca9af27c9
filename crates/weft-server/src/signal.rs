//! SIGINT/SIGTERM as a value: block them in every thread (call
//! [`block_termination`] before spawning any), then wait for them on one.

use std::io;

/// The blocked signal set.
pub struct Signals {
    set: libc::sigset_t,
}

/// Blocks SIGINT and SIGTERM in the calling thread and every thread it
/// spawns afterwards; they stay pending until [`Signals::wait`] takes them.
pub fn block_termination() -> io::Result<Signals> {
    // SAFETY: `set` is a plain C struct initialised by sigemptyset before
    // any other use; the calls only read/write it and the thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(Signals { set })
    }
}

impl Signals {
    /// Waits for SIGINT or SIGTERM; returns the signal number.
    pub fn wait(&self) -> io::Result<i32> {
        let mut sig: libc::c_int = 0;
        // SAFETY: `self.set` was initialised by `block_termination`; `sig`
        // is a valid out-pointer.
        let r = unsafe { libc::sigwait(&self.set, &mut sig) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(sig)
    }
}
