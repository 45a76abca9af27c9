//! A limit on the bytes per second the job pool writes (RocksDB's
//! `rate_limiter`), so that merges, GC, splits and consolidations leave the
//! disk's bandwidth — and, since a job's CPU time follows the bytes it
//! writes, the cores — to the foreground.
//!
//! A token bucket kept as a reservation clock: each request takes its bytes
//! at once, possibly into debt, and sleeps until the clock says the rate
//! has paid for them. Requests from several threads therefore add up to the
//! configured rate whatever their sizes, and a request larger than a
//! second's worth still passes (it just waits longer). Hand-written, not
//! the `governor` crate: its quotas count cells in `u32` with a burst bound
//! every request must fit in, where here one request is one buffered write
//! of up to a few hundred KiB and the rate is in bytes; the whole need is
//! the dozen lines below.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How far ahead of the clock an idle limiter lets writes go: the bytes of
/// this much time may be written at once after a pause.
const BURST: Duration = Duration::from_millis(100);

/// Limits writes to a number of bytes per second.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    bytes_per_second: u64,
    /// When the bytes granted so far will have been paid for at the rate.
    paid_until: Mutex<Instant>,
}

impl RateLimiter {
    /// A limiter of `bytes_per_second` (at least 1).
    pub fn new(bytes_per_second: u64) -> RateLimiter {
        RateLimiter {
            bytes_per_second: bytes_per_second.max(1),
            paid_until: Mutex::new(Instant::now()),
        }
    }

    /// Waits until `bytes` more may be written.
    pub fn request(&self, bytes: u64) {
        let wait = self.reserve(bytes, Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    /// Takes `bytes` at time `now`; returns how long the caller must wait
    /// before writing them.
    fn reserve(&self, bytes: u64, now: Instant) -> Duration {
        let nanos = u128::from(bytes) * 1_000_000_000 / u128::from(self.bytes_per_second);
        let cost = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        let mut paid_until = self.paid_until.lock();
        // Time unused while idle is not saved up: the clock restarts at
        // `now`, and only `BURST` may be written ahead of it.
        let start = (*paid_until).max(now);
        *paid_until = start + cost;
        paid_until.saturating_duration_since(now + BURST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At 1 MB/s: a burst's worth passes at once, then each request waits
    /// for what it adds, and a long pause lends no more than the burst.
    #[test]
    fn requests_wait_for_the_rate_and_idle_time_lends_only_the_burst() {
        let limiter = RateLimiter::new(1_000_000);
        let t0 = Instant::now();
        // 100 ms of burst: 100 kB pass at once (the clock starts at t0).
        assert_eq!(limiter.reserve(100_000, t0), Duration::ZERO);
        // The next 50 kB must wait 50 ms.
        assert_eq!(limiter.reserve(50_000, t0), Duration::from_millis(50));
        // ...and the next 50 kB 100 ms: reservations add up.
        assert_eq!(limiter.reserve(50_000, t0), Duration::from_millis(100));
        // After ten idle seconds, only the burst is free again.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(limiter.reserve(100_000, later), Duration::ZERO);
        assert_eq!(limiter.reserve(200_000, later), Duration::from_millis(200));
    }

    /// Several threads writing at once share the rate: 8 threads × 25 ×
    /// 10 kB reserved at one instant at 2 MB/s are paid for one second
    /// later, and the last of them waits that second less the burst,
    /// whatever the order the threads came in. (Reservations at a fixed
    /// instant: no clock is read, so no timing is asserted.)
    #[test]
    fn threads_share_the_rate() {
        let limiter = std::sync::Arc::new(RateLimiter::new(2_000_000));
        let t0 = *limiter.paid_until.lock();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let l = std::sync::Arc::clone(&limiter);
                std::thread::spawn(move || (0..25).map(|_| l.reserve(10_000, t0)).max())
            })
            .collect();
        let longest = threads
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .max()
            .unwrap();
        assert_eq!(*limiter.paid_until.lock(), t0 + Duration::from_secs(1));
        assert_eq!(longest, Duration::from_secs(1) - BURST);
    }
}
