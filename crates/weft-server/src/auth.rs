//! Authentication: `requirepass`, and the gate that slows password
//! guessing.
//!
//! # Model
//!
//! One user, `default`, as Redis without ACLs. Without a password every
//! connection starts authenticated (Redis's `nopass`). With one, a new
//! connection starts unauthenticated and may run only `AUTH`, `HELLO` and
//! `QUIT` (`-NOAUTH Authentication required.`) until `AUTH [default]
//! <password>` or `HELLO <proto> AUTH default <password>` succeeds.
//! `CONFIG SET requirepass` changes the password for connections made
//! afterwards and for later `AUTH`s; connections already authenticated
//! stay so (as in Redis). Passwords are compared in constant time.
//!
//! # Slowing guesses
//!
//! Every failed attempt is counted (`INFO stats` `acl_access_denied_auth`)
//! and spends one token of a server-wide budget: [`BURST`] failures pass
//! at once, then failures are admitted at [`RATE`] a second, the excess
//! queued (a generic cell rate algorithm: `tat` is when the queue
//! drains). The reply to an attempt — success or failure, so the timing
//! does not tell a right guess early — waits until the attempt's turn,
//! and the connection runs nothing else meanwhile (the event loop holds
//! it; no thread sleeps). A connection's own failures add a delay growing
//! with their number ([`per_connection_delay`]). However many connections
//! an attacker opens, guesses are answered at most `RATE` a second after
//! the burst. Without a password nothing is delayed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

/// Failures answered at once before the rate applies.
pub const BURST: u32 = 10;
/// Failures answered per second, server-wide, past the burst.
pub const RATE: u32 = 20;
/// The longest any one attempt is held.
pub const MAX_DELAY: Duration = Duration::from_secs(30);

/// The reply to a failed `AUTH`.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// The reply to a command before authentication.
pub const NOAUTH: &str = "NOAUTH Authentication required.";

/// The password and the guessing gate.
pub struct Auth {
    password: RwLock<Option<Arc<[u8]>>>,
    /// When the queue of admitted failures drains (GCRA's theoretical
    /// arrival time).
    tat: Mutex<Instant>,
    /// Failed attempts since start.
    pub failures: AtomicU64,
}

/// A connection's own failures: none for the first, then 25 ms doubling
/// per failure up to 2 s.
pub fn per_connection_delay(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => Duration::from_millis(25u64 << (n - 2).min(10)).min(Duration::from_secs(2)),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // The length is not secret enough to hide; the contents are.
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Auth {
    /// With `password` required (`None`: no password).
    pub fn new(password: Option<&[u8]>) -> Auth {
        Auth {
            password: RwLock::new(password.map(Arc::from)),
            tat: Mutex::new(Instant::now()),
            failures: AtomicU64::new(0),
        }
    }

    /// True when new connections must authenticate.
    pub fn required(&self) -> bool {
        self.password.read().is_some()
    }

    /// The password (`CONFIG GET requirepass`).
    pub fn password(&self) -> Option<Arc<[u8]>> {
        self.password.read().clone()
    }

    /// Sets or clears (`None` or empty) the password.
    pub fn set_password(&self, p: Option<&[u8]>) {
        *self.password.write() = p.filter(|p| !p.is_empty()).map(Arc::from);
    }

    /// Checks `user` (absent: `default`) and `pass`. Without a password
    /// the default user takes any password (Redis's `nopass`).
    pub fn check(&self, user: Option<&[u8]>, pass: &[u8]) -> bool {
        if user.is_some_and(|u| u != b"default") {
            return false;
        }
        match &*self.password.read() {
            None => true,
            Some(p) => constant_time_eq(p, pass),
        }
    }

    /// How long the reply to an attempt waits, given whether it `failed`
    /// and the connection's failures so far (this one included). Counts a
    /// failure.
    pub fn delay(&self, failed: bool, conn_failures: u32) -> Duration {
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        let now = Instant::now();
        let step = Duration::from_secs(1) / RATE;
        let burst = step * BURST;
        let mut tat = self.tat.lock();
        let start = (*tat).max(now);
        let gate = if failed {
            *tat = start + step;
            (*tat).saturating_duration_since(now + burst)
        } else {
            // A success waits as a failure would, without taking a turn.
            (start + step).saturating_duration_since(now + burst)
        };
        drop(tat);
        gate.max(if failed {
            per_connection_delay(conn_failures)
        } else {
            Duration::ZERO
        })
        .min(MAX_DELAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_admits_a_burst_then_a_rate() {
        let a = Auth::new(Some(b"pw"));
        assert!(a.check(None, b"pw"));
        assert!(a.check(Some(b"default"), b"pw"));
        assert!(!a.check(None, b"pX"));
        assert!(!a.check(Some(b"bob"), b"pw"));
        for _ in 0..BURST {
            assert_eq!(a.delay(true, 1), Duration::ZERO);
        }
        // The queue is full: each further failure waits one step longer.
        let d1 = a.delay(true, 1);
        let d2 = a.delay(true, 1);
        let step = Duration::from_secs(1) / RATE;
        assert!(d1 > Duration::ZERO && d1 <= step, "{d1:?}");
        assert!(d2 > d1 && d2 <= 2 * step, "{d1:?} {d2:?}");
        // A success now waits as long as a failure would.
        assert!(a.delay(false, 0) >= d2);
        assert_eq!(a.failures.load(Ordering::Relaxed), u64::from(BURST) + 2);
    }

    #[test]
    fn connection_delays_grow_and_stop_growing() {
        assert_eq!(per_connection_delay(1), Duration::ZERO);
        assert_eq!(per_connection_delay(2), Duration::from_millis(25));
        assert_eq!(per_connection_delay(3), Duration::from_millis(50));
        assert_eq!(per_connection_delay(60), Duration::from_secs(2));
    }

    #[test]
    fn without_a_password_anything_goes_for_default() {
        let a = Auth::new(None);
        assert!(!a.required());
        assert!(a.check(None, b"whatever"));
        assert!(!a.check(Some(b"bob"), b"x"));
        a.set_password(Some(b"s"));
        assert!(a.required());
        a.set_password(Some(b""));
        assert!(!a.required());
    }
}
