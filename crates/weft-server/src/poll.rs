//! The OS layer of the event loops: a level-triggered `epoll` set and an
//! `eventfd` waker, over `libc` (Linux only, as the rest of the server's
//! socket handling).
//!
//! Level-triggered on purpose: a connection may stop reading in the middle
//! of what the kernel holds (a per-iteration byte budget, or its reply
//! buffer is full), and the next wait reports it again without the loop
//! having to remember it. Interest in writability is only registered while
//! a reply is waiting for socket space, so an idle connection costs
//! nothing.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What a registration waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    /// Bytes to read (or the peer closed).
    pub read: bool,
    /// Room in the send buffer.
    pub write: bool,
}

impl Interest {
    /// Readable only.
    pub const READ: Interest = Interest {
        read: true,
        write: false,
    };

    fn bits(self) -> u32 {
        let mut b = 0;
        if self.read {
            b |= libc::EPOLLIN | libc::EPOLLRDHUP;
        }
        if self.write {
            b |= libc::EPOLLOUT;
        }
        b as u32
    }
}

/// One readiness report.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// The token given at registration.
    pub token: u64,
    /// Readable, or the peer hung up or the socket failed (a read will say
    /// which).
    pub readable: bool,
    /// Writable, or the socket failed.
    pub writable: bool,
}

/// An `epoll` instance.
pub struct Poller {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Poller {
    /// A new epoll set reporting up to `capacity` events per wait.
    pub fn new(capacity: usize) -> io::Result<Poller> {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is
        // a new descriptor that nothing else owns.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by the kernel and is owned here only.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let empty = libc::epoll_event { events: 0, u64: 0 };
        Ok(Poller {
            fd,
            events: vec![empty; capacity.max(1)],
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, bits: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: bits,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call;
        // the kernel copies it. A bad `fd` is reported as an error.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) })?;
        Ok(())
    }

    /// Starts watching `fd`.
    pub fn add(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, interest.bits(), token)
    }

    /// Starts watching a descriptor several pollers share (the listener):
    /// `EPOLLEXCLUSIVE` wakes one waiting loop per new connection instead
    /// of all of them.
    pub fn add_shared(&self, fd: RawFd, token: u64) -> io::Result<()> {
        // EPOLLEXCLUSIVE admits only EPOLLIN/EPOLLOUT/EPOLLET/EPOLLWAKEUP.
        let bits = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
        self.ctl(libc::EPOLL_CTL_ADD, fd, bits, token)
    }

    /// Changes what `fd` is watched for.
    pub fn modify(&self, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, interest.bits(), token)
    }

    /// Stops watching `fd` (closing it does too, once no duplicate is open).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout` (`None`: forever) and appends the reports to
    /// `out` (cleared first).
    pub fn wait(&mut self, out: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        out.clear();
        let ms = timeout.map_or(-1, |t| {
            // Round up so a short timeout never becomes a busy zero wait.
            let ms = t.as_micros().div_ceil(1000);
            ms.min(i32::MAX as u128) as libc::c_int
        });
        // SAFETY: `events` is a live buffer of `events.len()` entries the
        // kernel may fill; the length passed never exceeds it.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as libc::c_int,
                ms,
            )
        };
        let n = match check(n) {
            Ok(n) => n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        };
        let failed = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
        for ev in &self.events[..n] {
            let bits = ev.events;
            out.push(Event {
                token: ev.u64,
                readable: bits & (libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32 | failed) != 0,
                writable: bits & (libc::EPOLLOUT as u32 | failed) != 0,
            });
        }
        Ok(())
    }
}

/// Wakes a loop blocked in [`Poller::wait`] from another thread.
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    /// A new eventfd; register [`Waker::fd`] for reading.
    pub fn new() -> io::Result<Waker> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new
        // descriptor owned here only.
        let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: as above, `fd` is fresh and unowned.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Waker { fd })
    }

    /// The descriptor to register.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes the descriptor readable.
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64, as eventfd requires. A
        // full counter (EAGAIN) still leaves it readable, which is the goal.
        unsafe {
            libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }

    /// Resets the descriptor to not readable.
    pub fn reset(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; EAGAIN (already reset) is
        // harmless.
        unsafe {
            libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8);
        }
    }
}
