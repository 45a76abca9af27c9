//! The event loops: a few threads, each multiplexing many connections over
//! one `epoll` set.
//!
//! # Why loops, not a thread per connection
//!
//! A thread per connection (this server's first design) spent much of its
//! time in context switches under `redis-benchmark -c 50`, and its writes
//! met only in the engine's group commit. A loop wakes with every
//! connection that has something, runs their requests back to back,
//! commits the plain `SET`s they all ended with as one engine batch
//! ([`PendingSets`]), and sends the replies: one wake-up, one engine write,
//! one `write` per client.
//!
//! # Polling before sleeping
//!
//! After a wake-up that found work, a loop polls its set without sleeping
//! (`epoll_wait` with a zero timeout) for [`Config::busy_poll`] before it
//! blocks again. With many clients each waiting for its reply, the next
//! request is microseconds away; a loop that sleeps instead must be woken
//! for it, and the wake-up is paid by the sender (the client's `send`
//! runs the kernel's `try_to_wake_up`) and may pull the loop onto the
//! sender's core, where it waits its turn. At `redis-benchmark -P 1 -c 50`
//! on two cores the client needs a whole core, so those costs set the
//! pace, and a short poll raises the requests served per second (see
//! [`DEFAULT_BUSY_POLL`]). An idle loop sleeps: the poll lasts only while
//! requests keep coming, so a quiet server costs no CPU.
//!
//! Between polls that find nothing the loop yields its core. Without that,
//! three servers behind twemproxy on two cores (`bench/twemproxy`) served
//! clearly fewer SETs with polling on than with it off, the polls taking
//! the cores the proxy and the other servers needed; with it, at least as
//! many. A yield with nobody waiting returns at once, so a loop alone on
//! its core polls as before. The figures are in `bench/journal/`:
//! `2026-11-25-05-serve-busy-poll.md` ("A loop that polls before it
//! sleeps") and `2026-11-27-03-figures-from-code-comments.md`.
//!
//! [`Config::busy_poll`]: crate::Config::busy_poll
//! [`DEFAULT_BUSY_POLL`]: crate::DEFAULT_BUSY_POLL
//!
//! # Accepting
//!
//! Every loop watches the listener (`EPOLLEXCLUSIVE`: a new connection
//! wakes one of them). The loop that wakes accepts everything pending and
//! deals the connections round-robin over all loops; a connection for
//! another loop goes into that loop's inbox and its [`Waker`] fires. A
//! connection stays on its loop for life.
//!
//! # Stopping
//!
//! The loops look at the stop flag at least every [`TICK`]. A stopping loop
//! has already run every request it read (a wake-up always finishes its
//! work); it sends what is queued, waiting up to [`SHUTDOWN_WRITE`] for a
//! slow reader, and closes its connections.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::conn::{Conn, PendingSets};
use crate::deliver::{Delivery, Post};
use crate::poll::{Event, Interest, Poller};
use crate::server::Stop;
use crate::{cmd, Error, Shared};

/// Longest sleep in `epoll_wait`: the stop flag, idle timeouts and
/// lingering closes are checked at least this often.
const TICK: Duration = Duration::from_millis(100);
/// How long a stopping server waits for a client to take its last replies.
const SHUTDOWN_WRITE: Duration = Duration::from_secs(5);
/// Readiness reports taken per `epoll_wait`.
const EVENTS: usize = 1024;
/// Most keys in one batch of [`PendingSets`]; more are committed in
/// several batches (never splitting a request).
const MAX_GROUP_KEYS: usize = 4096;

const LISTENER: u64 = 0;
const WAKER: u64 = 1;
/// Connection tokens are slab slots offset by this.
pub(crate) const FIRST_CONN: u64 = 2;

/// State every loop shares.
struct Loops {
    shared: Arc<Shared>,
    listener: Arc<TcpListener>,
    stop: Arc<Stop>,
    /// Round-robin position for new connections.
    next_loop: AtomicUsize,
}

/// Starts `shared.config.threads` loops serving `listener` until `stop`.
pub(crate) fn start(
    shared: &Arc<Shared>,
    listener: &Arc<TcpListener>,
    stop: &Arc<Stop>,
) -> Result<Vec<JoinHandle<Result<(), Error>>>, Error> {
    let n = shared.postal.loops();
    let loops = Arc::new(Loops {
        shared: Arc::clone(shared),
        listener: Arc::clone(listener),
        stop: Arc::clone(stop),
        next_loop: AtomicUsize::new(0),
    });
    let mut threads = Vec::with_capacity(n);
    for i in 0..n {
        let mut lp = EventLoop::new(Arc::clone(&loops), i)?;
        let t = std::thread::Builder::new()
            .name(format!("weft-loop-{i}"))
            .spawn(move || lp.run())
            .map_err(|e| Error::io("starting an event loop", e))?;
        threads.push(t);
    }
    Ok(threads)
}

/// One loop and the connections it owns.
struct EventLoop {
    loops: Arc<Loops>,
    index: usize,
    poller: Poller,
    /// Connections by slot; token = slot + [`FIRST_CONN`].
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Slots touched in the current wake-up.
    touched: Vec<usize>,
    group: PendingSets,
    /// Deliveries from this loop's connections to this loop's connections.
    local: Vec<Post>,
    /// Deliveries taken from the mailbox.
    incoming: Vec<Post>,
    /// Slots that were delivered a wake-up in this wake-up.
    woken: Vec<usize>,
    /// Connections waiting for a time (a slowed `AUTH`, a blocking
    /// command's deadline): (when, slot, id), earliest first. An entry
    /// whose connection moved on is dropped when it fires.
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    last_sweep: Instant,
}

impl EventLoop {
    fn new(loops: Arc<Loops>, index: usize) -> Result<EventLoop, Error> {
        let poller = Poller::new(EVENTS).map_err(|e| Error::io("creating an epoll set", e))?;
        poller
            .add_shared(loops.listener.as_raw_fd(), LISTENER)
            .map_err(|e| Error::io("watching the listener", e))?;
        poller
            .add(
                loops.shared.postal.mailbox(index).waker.fd(),
                WAKER,
                Interest::READ,
            )
            .map_err(|e| Error::io("watching the eventfd", e))?;
        Ok(EventLoop {
            loops,
            index,
            poller,
            conns: Vec::new(),
            free: Vec::new(),
            touched: Vec::new(),
            group: PendingSets::default(),
            local: Vec::new(),
            incoming: Vec::new(),
            woken: Vec::new(),
            timers: BinaryHeap::new(),
            last_sweep: Instant::now(),
        })
    }

    fn run(&mut self) -> Result<(), Error> {
        let mut events: Vec<Event> = Vec::with_capacity(EVENTS);
        let stop = Arc::clone(&self.loops.stop);
        let busy_poll = self.loops.shared.config.busy_poll;
        let mut now = Instant::now();
        // Until when this loop polls instead of sleeping.
        let mut poll_until = now;
        while !stop.stopped() {
            let timeout = if now < poll_until {
                Duration::ZERO
            } else {
                self.timers
                    .peek()
                    .map(|t| t.0 .0.saturating_duration_since(now))
                    .map_or(TICK, |d| d.min(TICK))
            };
            self.poller
                .wait(&mut events, Some(timeout))
                .map_err(|e| Error::io("waiting for sockets", e))?;
            now = Instant::now();
            let fired = self.fire_timers(now);
            if !events.is_empty() || fired {
                for ev in &events {
                    match ev.token {
                        LISTENER => self.accept_all(),
                        WAKER => self.take_inbox(),
                        t => self.on_event(t, ev.readable, ev.writable),
                    }
                }
                self.retry_woken();
                self.commit_group();
                self.flush_wal();
                self.deliver_local();
                self.settle_touched();
                now = Instant::now();
                poll_until = now + busy_poll;
            } else if timeout.is_zero() {
                // Polling found nothing: let any thread waiting for this
                // core have it before the next poll.
                std::thread::yield_now();
            }
            if now.duration_since(self.last_sweep) >= TICK {
                self.last_sweep = now;
                self.sweep(now);
            }
        }
        // Connections handed over but never registered: close them.
        self.take_inbox();
        for slot in 0..self.conns.len() {
            if let Some(mut c) = self.conns[slot].take() {
                c.finish(SHUTDOWN_WRITE);
                c.release(&self.loops.shared);
                self.loops
                    .shared
                    .counters
                    .connected
                    .fetch_sub(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Hands the connections whose time has come to them (a hold ends, a
    /// blocking command times out); true if any timer fired.
    fn fire_timers(&mut self, now: Instant) -> bool {
        let mut fired = false;
        while let Some(&Reverse((when, slot, id))) = self.timers.peek() {
            if when > now {
                break;
            }
            self.timers.pop();
            fired = true;
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                continue;
            };
            if conn.id() != id {
                continue;
            }
            conn.on_timer(
                &self.loops.shared,
                when,
                now,
                &mut self.group,
                &mut self.local,
            );
            self.touched.push(slot);
        }
        fired
    }

    /// Lets the connections woken in this wake-up re-run their blocking
    /// commands: after every delivery is in, before the group commit and
    /// the WAL flush that their writes and replies need.
    fn retry_woken(&mut self) {
        if self.woken.is_empty() {
            return;
        }
        let mut woken = std::mem::take(&mut self.woken);
        woken.sort_unstable();
        woken.dedup();
        for &slot in &woken {
            if let Some(Some(conn)) = self.conns.get_mut(slot) {
                conn.retry(&self.loops.shared, &mut self.group, &mut self.local);
                self.touched.push(slot);
            }
        }
        woken.clear();
        self.woken = woken;
    }

    /// Hands deliveries to this loop's connections.
    fn deliver(&mut self, posts: &mut Vec<Post>) {
        if posts.is_empty() {
            return;
        }
        let now = Instant::now();
        for p in posts.drain(..) {
            let slot = p.slot as usize;
            let conn = match self.conns.get_mut(slot) {
                Some(Some(c)) if c.id() == p.id => c,
                _ => {
                    // Closed (the slot may hold a later connection). A
                    // wake-up goes to the next waiter instead.
                    if let Delivery::Wake(w) = p.what {
                        crate::cmd::blocking::pass_on(&self.loops.shared, &[w]);
                    }
                    continue;
                }
            };
            if matches!(p.what, Delivery::Wake(_) | Delivery::Unblock(_)) {
                self.woken.push(slot);
            }
            conn.deliver(&self.loops.shared, p.what, now);
            self.touched.push(slot);
        }
    }

    /// Deliveries this loop's connections made to each other in this
    /// wake-up.
    fn deliver_local(&mut self) {
        if self.local.is_empty() {
            return;
        }
        let mut posts = std::mem::take(&mut self.local);
        self.deliver(&mut posts);
        self.local = posts;
    }

    fn on_event(&mut self, token: u64, readable: bool, writable: bool) {
        let slot = (token - FIRST_CONN) as usize;
        let Some(Some(conn)) = self.conns.get_mut(slot) else {
            return; // closed earlier in this wake-up
        };
        conn.on_ready(
            &self.loops.shared,
            readable,
            writable,
            &mut self.group,
            &mut self.local,
        );
        self.touched.push(slot);
        if self.group.keys >= MAX_GROUP_KEYS {
            self.commit_group();
        }
    }

    /// Commits the plain SETs the ready connections ended with and hands
    /// each its replies.
    fn commit_group(&mut self) {
        if self.group.sets.is_empty() {
            return;
        }
        let started = Instant::now();
        // Only connections on database 0 hand their runs over (`Conn::run_requests`).
        let r = cmd::commit_sets(&self.loops.shared.store.view(0), &self.group.sets);
        let each = started.elapsed() / self.group.sets.len() as u32;
        let mut at = 0;
        for &(token, n) in &self.group.owners {
            let slot = (token - FIRST_CONN) as usize;
            let who = self.conns[slot].as_ref().map_or(("", &[][..]), Conn::label);
            let reqs = &self.group.sets[at..at + n];
            cmd::count_plain(&self.loops.shared, self.index, reqs, each, r.is_err(), who);
            at += n;
        }
        let mut sets = self.group.sets.drain(..);
        for &(token, n) in &self.group.owners {
            let slot = (token - FIRST_CONN) as usize;
            let conn = self.conns[slot]
                .as_mut()
                .expect("a connection with uncommitted requests is never closed");
            conn.take_group_replies(sets.by_ref().take(n), &r);
        }
        debug_assert!(sets.next().is_none(), "every request has its owner");
        drop(sets);
        self.group.owners.clear();
        self.group.keys = 0;
    }

    /// Hands the WAL records of this wake-up's writes to the OS before any
    /// of their replies is sent (the database runs with
    /// `manual_wal_flush`; see the crate docs). On failure the database is
    /// poisoned, and the touched connections are closed unanswered: their
    /// writes may be lost, so they get no `+OK`.
    fn flush_wal(&mut self) {
        if self.loops.shared.store.db.flush_wal().is_ok() {
            return;
        }
        for &slot in &self.touched {
            if let Some(conn) = self.conns[slot].as_mut() {
                conn.abort();
            }
        }
    }

    /// Sends replies of the connections touched in this wake-up, updates
    /// their interest, drops the closed ones.
    fn settle_touched(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        for &slot in &touched {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            conn.after_group();
            self.settle(slot);
        }
        touched.clear();
        self.touched = touched;
    }

    /// Drops `slot` if closed, else registers the interest it needs.
    fn settle(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if conn.is_closed() {
            self.remove(slot);
            return;
        }
        if let Some(when) = conn.timer() {
            if conn.timer_armed != Some(when) {
                self.timers.push(Reverse((when, slot, conn.id())));
                conn.timer_armed = Some(when);
            }
        }
        let want = conn.wanted_interest();
        if want != conn.registered {
            let fd = conn.stream.as_raw_fd();
            if self.poller.modify(fd, conn.token, want).is_err() {
                self.remove(slot);
                return;
            }
            if let Some(conn) = self.conns[slot].as_mut() {
                conn.registered = want;
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        if let Some(mut conn) = self.conns[slot].take() {
            let _ = self.poller.delete(conn.stream.as_raw_fd());
            conn.release(&self.loops.shared);
            self.free.push(slot);
            self.loops
                .shared
                .counters
                .connected
                .fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Idle timeouts and lingering closes.
    fn sweep(&mut self, now: Instant) {
        let idle = self.loops.shared.runtime.timeout();
        for slot in 0..self.conns.len() {
            if let Some(conn) = self.conns[slot].as_mut() {
                conn.check_deadline(&self.loops.shared, now, idle);
                if conn.is_closed() {
                    self.remove(slot);
                }
            }
        }
    }

    /// Accepts every pending connection and deals them over the loops.
    fn accept_all(&mut self) {
        loop {
            match self.loops.listener.accept() {
                Ok((stream, _)) => self.admit(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => {
                    // EMFILE and friends: the listener stays readable; back
                    // off briefly instead of spinning on it.
                    eprintln!("weft serve: accept: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    return;
                }
            }
        }
    }

    /// Admits one new connection (or refuses it at `maxclients`) and
    /// chooses its loop.
    fn admit(&mut self, mut stream: TcpStream) {
        let shared = &self.loops.shared;
        let c = &shared.counters;
        c.connections.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        // Counted here, before it reaches its loop, so maxclients holds
        // however the connections are dealt.
        let connected = c.connected.fetch_add(1, Ordering::Relaxed);
        if connected >= shared.runtime.maxclients.load(Ordering::Relaxed) as u64 {
            c.connected.fetch_sub(1, Ordering::Relaxed);
            c.rejected.fetch_add(1, Ordering::Relaxed);
            let _ = stream.write_all(b"-ERR max number of clients reached\r\n");
            return;
        }
        if stream.set_nonblocking(true).is_err() {
            c.connected.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let id = c.next_client_id.fetch_add(1, Ordering::Relaxed);
        let n = shared.postal.loops();
        let target = self.loops.next_loop.fetch_add(1, Ordering::Relaxed) % n;
        if target == self.index {
            self.register(stream, id);
        } else {
            let mb = shared.postal.mailbox(target);
            mb.new_conns.lock().push((stream, id));
            mb.waker.wake();
        }
    }

    /// Takes what other threads handed this loop: new connections and
    /// deliveries. The eventfd is reset first, so anything handed over
    /// after the take wakes the loop again.
    fn take_inbox(&mut self) {
        let loops = Arc::clone(&self.loops);
        let mb = loops.shared.postal.mailbox(self.index);
        mb.waker.reset();
        let new: Vec<(TcpStream, u64)> = std::mem::take(&mut *mb.new_conns.lock());
        for (stream, id) in new {
            self.register(stream, id);
        }
        let mut posts = std::mem::take(&mut self.incoming);
        self.loops.shared.postal.take(self.index, &mut posts);
        self.deliver(&mut posts);
        self.incoming = posts;
    }

    fn register(&mut self, stream: TcpStream, id: u64) {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let token = slot as u64 + FIRST_CONN;
        let fd = stream.as_raw_fd();
        if self.poller.add(fd, token, Interest::READ).is_err() {
            self.free.push(slot);
            self.loops
                .shared
                .counters
                .connected
                .fetch_sub(1, Ordering::Relaxed);
            return;
        }
        self.conns[slot] = Some(Conn::new(
            &self.loops.shared,
            stream,
            token,
            id,
            self.index as u32,
        ));
    }
}
