//! One client connection as a non-blocking state machine: read what the
//! kernel has, run every complete request, queue the replies, write them
//! when the socket has room.
//!
//! The event loop ([`crate::server`]) owns the connections and calls
//! [`Conn::on_ready`] for each readiness report. A connection never blocks
//! on its socket; it blocks only in engine calls (a `--sync always` write
//! waits for its fsync).
//!
//! # Writes shared between clients
//!
//! A run of plain `SET`/`MSET` requests at the *end* of what a connection
//! has read is not committed by the connection: it is handed to the loop's
//! [`PendingSets`], which commits the trailing runs of every connection
//! that was ready in the same wake-up as one engine batch, then appends
//! each connection's `+OK`s. Fifty clients each sending one `SET` cost one
//! engine write, not fifty. A run followed by any other request is
//! committed by its connection first (one batch of its own), so replies
//! keep their order and later requests see the writes.
//!
//! # Bounds
//!
//! A connection stops parsing while more than [`OUT_HIGH_WATER`] reply
//! bytes wait for a client that does not read, and stops reading while it
//! is paused; it asks to be woken when it can write, and then resumes
//! parsing even if the client has meanwhile taken every reply. So a client
//! can hold at most one read's worth of requests plus one high-water mark
//! of replies and the last replies that crossed it: one request's, or one
//! run of up to [`MAX_GET_RUN`] plain `GET`s (answered by one engine read,
//! see [`cmd::answer_gets`]). One incomplete request may hold
//! `max_query_buffer` bytes (and never less than one `max_bulk` string).
//! Answered requests go back to the parser ([`Parser::recycle`]), which
//! keeps up to 64 KiB of their buffers for the next ones.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clients::ClientInfo;
use crate::cmd::{self, Ctx, Session};
use crate::deliver::{ClientRef, Delivery, Post, Wake};
use crate::poll::Interest;
use crate::resp::{Args, Limits, Out, Parser};
use crate::Shared;

/// Bytes read per `read` call when no large bulk string is pending.
const READ_CHUNK: usize = 16 << 10;
/// Reply bytes waiting for the client that pause request processing.
pub(crate) const OUT_HIGH_WATER: usize = 64 << 10;
/// Most bytes read ahead in one call while a large bulk string arrives.
const MAX_READ_CHUNK: usize = 4 << 20;
/// Most keys written by one connection's own batch of SET/MSET requests.
const MAX_RUN_KEYS: usize = 512;
/// Most plain GETs answered by one engine read. Their replies are
/// appended together, so this many values may pass the high-water mark.
const MAX_GET_RUN: usize = 16;
/// How long a closing connection keeps reading (and discarding) what the
/// client still sends, so that the kernel does not reset the connection
/// and destroy the final reply before the client reads it.
const LINGER: Duration = Duration::from_millis(200);
/// Most bytes discarded while lingering.
const LINGER_BYTES: usize = 4 << 20;

/// Plain SET/MSET runs handed over by the connections of one loop, to be
/// committed as one batch at the end of the loop's wake-up.
#[derive(Default)]
pub(crate) struct PendingSets {
    /// The requests, each connection's run contiguous and in order.
    pub sets: Vec<Args>,
    /// (connection token, requests) in the order of `sets`.
    pub owners: Vec<(u64, usize)>,
    /// Keys in `sets`.
    pub keys: usize,
}

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Serving requests.
    Open,
    /// Sending the last replies; then [`State::Lingering`].
    Closing,
    /// Our side is shut; discarding input until EOF or the deadline.
    Lingering { until: Instant, left: usize },
    /// Done: the loop drops it.
    Closed,
}

/// One client.
pub(crate) struct Conn {
    pub stream: TcpStream,
    /// This connection's poll token.
    pub token: u64,
    /// The interest currently registered.
    pub registered: Interest,
    /// Last time the client sent something (idle timeout).
    pub last_active: Instant,
    parser: Parser,
    /// buf[pos..end] holds unparsed bytes; buf[end..] is free space.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    out: Out,
    /// Bytes of `out.buf` already written.
    sent: usize,
    session: Session,
    max_held: usize,
    state: State,
    /// Requests of this connection waiting in the loop's [`PendingSets`].
    in_group: bool,
    /// `run_requests` stopped at [`OUT_HIGH_WATER`], maybe with requests
    /// left in `buf`: the connection asks to be woken when it can write,
    /// even once its replies are all sent (the client may take them before
    /// the loop looks again, and send nothing more).
    paused: bool,
    /// The client shut its sending side: answer what it sent, then close.
    eof: bool,
    /// Since when the unsent output of a subscriber has been above the
    /// soft pub/sub limit.
    over_soft_since: Option<Instant>,
    /// The request of the blocking command this connection is parked in
    /// (`session.blocking.parked`), kept to re-run it when woken.
    blocked_args: Option<Args>,
    /// Wake-ups delivered in this loop wake-up, acted on by [`Conn::retry`].
    wakes: Vec<Wake>,
    /// A `CLIENT UNBLOCK` delivered and not acted on yet.
    unblock: Option<crate::deliver::Unblock>,
    /// The time of this connection's entry in the loop's timer heap, if it
    /// has one that has not fired.
    pub timer_armed: Option<Instant>,
}

impl Conn {
    pub fn new(shared: &Shared, stream: TcpStream, token: u64, id: u64, loop_ix: u32) -> Conn {
        let limits = Limits {
            max_bulk: shared.config.max_bulk,
            ..Limits::default()
        };
        let max_held = shared
            .config
            .max_query_buffer
            .max(shared.config.max_bulk.saturating_add(64 << 10));
        let me = ClientRef {
            loop_ix,
            slot: (token - crate::event_loop::FIRST_CONN) as u32,
            id,
        };
        let addr_of = |a: io::Result<std::net::SocketAddr>| {
            a.map_or_else(|_| "?:0".into(), |a| a.to_string())
        };
        let info = Arc::new(ClientInfo::new(
            me,
            addr_of(stream.peer_addr()),
            addr_of(stream.local_addr()),
            stream.as_raw_fd(),
        ));
        shared.clients.add(Arc::clone(&info));
        Conn {
            stream,
            token,
            registered: Interest::READ,
            last_active: Instant::now(),
            parser: Parser::new(limits),
            buf: Vec::new(),
            pos: 0,
            end: 0,
            out: Out::default(),
            sent: 0,
            session: Session {
                id,
                me,
                authenticated: !shared.auth.required(),
                info: Some(info),
                ..Session::default()
            },
            max_held,
            state: State::Open,
            in_group: false,
            paused: false,
            eof: false,
            over_soft_since: None,
            blocked_args: None,
            wakes: Vec::new(),
            unblock: None,
            timer_armed: None,
        }
    }

    /// The client id.
    pub fn id(&self) -> u64 {
        self.session.id
    }

    /// The client's address and name (the slow log's).
    pub fn label(&self) -> (&str, &[u8]) {
        client_label(&self.session)
    }

    /// When the loop must call [`Conn::on_timer`]: the end of a hold (a
    /// slowed `AUTH`: it reads, runs and writes nothing before then) or
    /// the deadline of a blocking command.
    pub fn timer(&self) -> Option<Instant> {
        let deadline = self
            .session
            .blocking
            .parked
            .as_ref()
            .and_then(|p| p.deadline);
        match (self.session.hold_until, deadline) {
            (Some(h), Some(d)) => Some(h.min(d)),
            (h, d) => h.or(d),
        }
    }

    /// The loop's timer entry for `when` fired: ends a hold whose time has
    /// come (sends what waited), or times a blocking command out (its null
    /// reply), and runs the requests that arrived meanwhile.
    pub fn on_timer(
        &mut self,
        shared: &Shared,
        when: Instant,
        now: Instant,
        group: &mut PendingSets,
        local: &mut Vec<Post>,
    ) {
        if self.timer_armed == Some(when) {
            self.timer_armed = None;
        }
        if self.session.hold_until.is_some_and(|t| t > now) {
            return;
        }
        self.session.hold_until = None;
        if crate::repl::wait_resume(shared, &mut self.session, &mut self.out, now) {
            return; // WAIT goes on: held again
        }
        if let Some(p) = &self.session.blocking.parked {
            if p.deadline.is_none_or(|d| d > now) {
                return;
            }
            let mut ctx = Ctx {
                shared,
                session: &mut self.session,
                out: &mut self.out,
                exec: None,
            };
            cmd::blocking::time_out(&mut ctx);
            if let Some(args) = self.blocked_args.take() {
                self.parser.recycle(args);
            }
        }
        if self.state == State::Open {
            self.run_requests(shared, group, local);
        }
    }

    /// Acts on the wake-ups delivered to this connection: re-runs the
    /// blocking command it is parked in, and if that answers, the requests
    /// that arrived meanwhile. Wake-ups it cannot use are passed on.
    pub fn retry(&mut self, shared: &Shared, group: &mut PendingSets, local: &mut Vec<Post>) {
        if let Some(u) = self.unblock.take() {
            if self.state == State::Open {
                let mut ctx = Ctx {
                    shared,
                    session: &mut self.session,
                    out: &mut self.out,
                    exec: None,
                };
                if cmd::blocking::unblock(&mut ctx, &u) {
                    if let Some(args) = self.blocked_args.take() {
                        self.parser.recycle(args);
                    }
                    // Wake-ups that came with it find it unparked: passed
                    // on below.
                    let wakes = std::mem::take(&mut self.wakes);
                    cmd::blocking::pass_on(shared, &wakes);
                    self.run_requests(shared, group, local);
                    return;
                }
            }
        }
        if self.wakes.is_empty() {
            return;
        }
        let wakes = std::mem::take(&mut self.wakes);
        let args = match self.blocked_args.take() {
            Some(a) if self.state == State::Open => a,
            other => {
                self.blocked_args = other;
                cmd::blocking::pass_on(shared, &wakes);
                return;
            }
        };
        let mut ctx = Ctx {
            shared,
            session: &mut self.session,
            out: &mut self.out,
            exec: None,
        };
        cmd::blocking::retry(&mut ctx, &args, &wakes);
        if self.session.blocking.parked.is_some() {
            self.blocked_args = Some(args);
            return;
        }
        self.parser.recycle(args);
        self.run_requests(shared, group, local);
    }

    /// Takes a delivery from another connection ([`crate::deliver`]).
    /// `now` is the time of the loop's batch of deliveries (the output
    /// limit's clock: one read per batch, not per message).
    pub fn deliver(&mut self, shared: &Shared, what: Delivery, now: Instant) {
        if self.state != State::Open {
            if let Delivery::Wake(w) = what {
                cmd::blocking::pass_on(shared, &[w]);
            }
            return;
        }
        match what {
            Delivery::Message(m) => {
                let subscribed = if m.pattern {
                    self.session.patterns.contains(&*m.via)
                } else {
                    self.session.channels.contains(&*m.via)
                };
                if subscribed {
                    m.write_to(&mut self.out.buf, self.out.resp3);
                    self.check_output_limit(shared, now);
                }
            }
            Delivery::Monitor(line) => {
                if self.session.monitor {
                    self.out.buf.extend_from_slice(&line);
                    self.check_output_limit(shared, now);
                }
            }
            Delivery::Kill => self.abort(),
            Delivery::Wake(w) => self.wakes.push(w),
            Delivery::Unblock(u) => self.unblock = Some(u),
        }
    }

    /// Redis's `client-output-buffer-limit pubsub` for a subscriber or a
    /// `MONITOR` client: past the hard limit, or over the soft limit for
    /// longer than its seconds, the client is disconnected (what it has
    /// queued is dropped).
    fn check_output_limit(&mut self, shared: &Shared, now: Instant) {
        if !(self.session.in_pubsub() || self.session.monitor) {
            self.over_soft_since = None;
            return;
        }
        let unsent = self.unsent() as u64;
        if let Some(info) = &self.session.info {
            info.omem.store(unsent, Ordering::Relaxed);
        }
        let l = shared.runtime.pubsub_limit();
        if l.hard > 0 && unsent > l.hard {
            self.abort();
            return;
        }
        if l.soft > 0 && unsent > l.soft {
            let since = *self.over_soft_since.get_or_insert(now);
            if now.duration_since(since) > Duration::from_secs(l.soft_seconds) {
                self.abort();
            }
        } else {
            self.over_soft_since = None;
        }
    }

    /// After `PSYNC`: hands a second handle of the socket, and the replies
    /// not sent yet, to a replica sender thread; the connection stays to
    /// read the replica's acknowledgements ([`crate::repl::primary`]).
    fn become_replica_link(&mut self, shared: &Shared) {
        let Some(req) = self.session.psync.take() else {
            return;
        };
        let Ok(stream) = self.stream.try_clone() else {
            self.close();
            return;
        };
        let pending = self.out.buf.split_off(self.sent);
        self.out.buf.clear();
        self.sent = 0;
        let ip = (self.session.info.as_ref())
            .and_then(|i| i.addr.rsplit_once(':').map(|(ip, _)| ip.to_string()))
            .unwrap_or_default();
        if let Some(info) = &self.session.info {
            info.replica.store(true, Ordering::Relaxed);
        }
        let link = crate::repl::primary::start(shared, stream, pending, req, self.session.id, ip);
        self.session.repl_link = Some(link);
    }

    /// Called once the connection is dropped: leaves its subscriptions,
    /// the key FIFOs of a blocking command (passing on wake-ups it will not
    /// take) and the client registry.
    pub fn release(&mut self, shared: &Shared) {
        cmd::blocking::depart(shared, &mut self.session, &self.wakes);
        self.wakes.clear();
        if let Some(link) = &self.session.repl_link {
            link.closed.store(true, Ordering::Release);
        }
        for ch in &self.session.channels {
            shared.hub.unsubscribe(ch, self.session.id);
        }
        for p in &self.session.patterns {
            shared.hub.punsubscribe(p, self.session.id);
        }
        shared.clients.remove(self.session.id);
    }

    /// Sends the deliveries the requests run so far produced: those for
    /// this loop to `local`, the others to their loops' mailboxes, one
    /// batch per loop.
    fn flush_posts(&mut self, shared: &Shared, local: &mut Vec<Post>) {
        let posts = &mut self.session.posts;
        if posts.is_empty() {
            return;
        }
        let mine = self.session.me.loop_ix;
        // Stable: each loop's posts keep their order. Wake-ups of blocked
        // clients (and unblocks) go after everything else: a woken client's keyspace
        // events then follow those of the writes that woke it
        // (`cmd::blocking::wake_next_after`).
        let last = |what: &Delivery| matches!(what, Delivery::Wake(_) | Delivery::Unblock(_));
        posts.sort_by_key(|(to, what)| (last(what), to.loop_ix));
        let mut rest = &mut posts[..];
        while let Some(first) = rest.first() {
            let target = (last(&first.1), first.0.loop_ix);
            let n = rest
                .iter()
                .take_while(|(to, what)| (last(what), to.loop_ix) == target)
                .count();
            let (batch, tail) = rest.split_at_mut(n);
            let it = batch.iter_mut().map(|(to, what)| Post {
                slot: to.slot,
                id: to.id,
                what: std::mem::replace(what, Delivery::Kill),
            });
            // A wake-up (or unblock) goes through the mailbox even to this
            // loop: the loop re-runs woken clients only on a wake-up of its
            // own (`event_loop.rs`, `retry_woken`).
            if target.1 == mine && !target.0 {
                local.extend(it);
            } else {
                shared.postal.post_all(target.1 as usize, it);
            }
            rest = tail;
        }
        posts.clear();
    }

    /// True once the connection is finished and may be dropped.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    fn unsent(&self) -> usize {
        self.out.buf.len() - self.sent
    }

    /// Handles one readiness report: reads and runs requests, writes
    /// replies that fit. Trailing plain SETs go to `group`; the loop calls
    /// [`Conn::take_group_replies`] after committing it and then
    /// [`Conn::after_group`].
    pub fn on_ready(
        &mut self,
        shared: &Shared,
        readable: bool,
        writable: bool,
        group: &mut PendingSets,
        local: &mut Vec<Post>,
    ) {
        if self.session.hold_until.is_some() {
            // A held connection registers no interest, so a report now is
            // a hang-up or a socket error: nothing more will be answered.
            if readable || writable {
                self.close();
            }
            return;
        }
        if writable && self.unsent() > 0 {
            self.write_out();
        }
        match self.state {
            State::Open => {
                if readable && !self.eof && self.unsent() < OUT_HIGH_WATER {
                    self.read_in(shared);
                }
                if self.session.blocking.parked.is_some() {
                    self.check_parked();
                } else if self.state == State::Open {
                    self.run_requests(shared, group, local);
                }
            }
            State::Lingering { .. } if readable => self.discard_input(),
            _ => {}
        }
    }

    /// A parked connection keeps reading (what it reads waits in its
    /// buffer) so that a client that hangs up is noticed: as Redis, it is
    /// dropped at once, and so is one whose unread requests pass the query
    /// buffer limit.
    fn check_parked(&mut self) {
        let held = self.parser.held().saturating_add(self.end - self.pos);
        if self.eof || held > self.max_held {
            self.close();
        }
    }

    /// Called after the loop's group was committed (whether or not this
    /// connection had requests in it): writes what fits and moves towards
    /// closing.
    pub fn after_group(&mut self) {
        if self.session.hold_until.is_some() {
            return;
        }
        if self.unsent() > 0 {
            self.write_out();
        }
        if self.state == State::Closing && self.unsent() == 0 {
            self.start_linger();
        }
    }

    /// Appends the replies for this connection's requests of a committed
    /// group, and takes the requests back for their buffers.
    pub fn take_group_replies(
        &mut self,
        requests: impl ExactSizeIterator<Item = Args>,
        r: &cmd::CmdResult,
    ) {
        debug_assert!(self.in_group);
        self.in_group = false;
        cmd::reply_sets(&mut self.out, requests.len(), r);
        for args in requests {
            self.parser.recycle(args);
        }
    }

    /// The interest this connection needs now.
    pub fn wanted_interest(&self) -> Interest {
        if self.session.hold_until.is_some() && self.state != State::Closed {
            return Interest {
                read: false,
                write: false,
            };
        }
        match self.state {
            State::Open => Interest {
                read: !self.eof && self.unsent() < OUT_HIGH_WATER,
                write: self.unsent() > 0 || self.paused,
            },
            State::Closing => Interest {
                read: false,
                write: true,
            },
            State::Lingering { .. } => Interest::READ,
            State::Closed => Interest {
                read: false,
                write: false,
            },
        }
    }

    /// Closes idle or lingering connections whose time is up.
    pub fn check_deadline(&mut self, shared: &Shared, now: Instant, idle: Option<Duration>) {
        if self.over_soft_since.is_some() && self.state == State::Open {
            self.check_output_limit(shared, now);
        }
        // Subscribers, monitors and blocked clients are never idle (as in
        // Redis).
        let listening = self.session.in_pubsub()
            || self.session.monitor
            || self.session.blocking.parked.is_some();
        let expired = match self.state {
            State::Open if listening => false,
            State::Open => idle.is_some_and(|t| now.duration_since(self.last_active) > t),
            State::Lingering { until, .. } => now >= until,
            _ => false,
        };
        if expired {
            self.close();
        }
    }

    /// Server shutdown: sends what is queued (waiting at most `timeout`
    /// for a slow client), then closes.
    pub fn finish(&mut self, timeout: Duration) {
        if self.unsent() > 0 && self.state != State::Closed {
            let _ = self.stream.set_nonblocking(false);
            let _ = self.stream.set_write_timeout(Some(timeout));
            let _ = self.stream.write_all(&self.out.buf[self.sent..]);
            self.sent = self.out.buf.len();
        }
        let _ = self.stream.shutdown(Shutdown::Both);
        self.state = State::Closed;
    }

    fn close(&mut self) {
        self.state = State::Closed;
    }

    /// Closes without sending what is queued (the writes those replies
    /// acknowledge may be lost).
    pub fn abort(&mut self) {
        self.out.buf.clear();
        self.sent = 0;
        self.close();
    }

    /// Reads once: up to [`READ_CHUNK`], or what a pending bulk string
    /// needs (bounded). Level-triggered polling reports the socket again if
    /// more is waiting, so one read per wake-up keeps connections fair.
    fn read_in(&mut self, shared: &Shared) {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        let want = self.parser.pending_bulk().map_or(READ_CHUNK, |n| {
            n.saturating_sub(self.end).clamp(READ_CHUNK, MAX_READ_CHUNK)
        });
        if self.buf.len() - self.end < want {
            self.buf.resize(self.end + want, 0);
        } else if self.end == 0 && self.buf.len() > 4 * MAX_READ_CHUNK {
            self.buf = vec![0u8; READ_CHUNK];
        }
        match self.stream.read(&mut self.buf[self.end..]) {
            Ok(0) => self.eof = true,
            Ok(n) => {
                self.end += n;
                self.last_active = Instant::now();
                if let Some(info) = &self.session.info {
                    info.touch(self.last_active);
                }
                let st = shared.stats.for_loop(self.session.me.loop_ix as usize);
                st.net_input.store(
                    st.net_input.load(Ordering::Relaxed) + n as u64,
                    Ordering::Relaxed,
                );
            }
            Err(e) if is_transient(&e) => {}
            Err(_) => self.close(),
        }
    }

    /// Runs every complete request in the buffer, until the reply buffer
    /// reaches its high-water mark.
    fn run_requests(&mut self, shared: &Shared, group: &mut PendingSets, local: &mut Vec<Post>) {
        if self.in_group || self.session.blocking.parked.is_some() {
            // Its trailing run is not committed yet: nothing may overtake
            // it. Or it is parked in a blocking command: nothing runs
            // before that command answers.
            return;
        }
        self.paused = false;
        let max_bulk = shared.config.max_bulk;
        let mut run: Vec<Args> = Vec::new();
        let mut run_keys = 0usize;
        // Plain GETs waiting to be answered together. At most one of `run`
        // and `gets` holds requests: each is settled before a request of
        // another kind runs, so replies and effects keep request order.
        let mut gets: Vec<Args> = Vec::new();
        let mut stop = false;
        let mut exhausted = false;
        loop {
            if self.unsent() >= OUT_HIGH_WATER {
                // Deliveries go before the replies that report them.
                self.flush_posts(shared, local);
                // These replies may acknowledge writes of this wake-up.
                if shared.store.db.flush_wal().is_err() {
                    self.abort();
                    return;
                }
                self.write_out();
                if self.unsent() >= OUT_HIGH_WATER {
                    self.paused = true; // until the client reads
                    break;
                }
            }
            match self.parser.next(&self.buf[..self.end], &mut self.pos) {
                Ok(Some(args)) => {
                    // Unauthenticated, subscribed and monitored clients, and
                    // those queuing a transaction, take the checked path for
                    // every command.
                    let plain = self.session.authenticated
                        && !self.session.in_pubsub()
                        && !self.session.in_multi()
                        && !shared.clients.monitoring();
                    // The group commit of SETs raises no keyspace events:
                    // not taken while any is published.
                    if plain
                        && cmd::is_plain_set(max_bulk, &args)
                        && !shared.repl.gated()
                        && shared.store.notify.effective() == 0
                    {
                        self.answer_gets(shared, &mut gets);
                        if run_keys >= MAX_RUN_KEYS {
                            self.commit_run(shared, &mut run);
                            run_keys = 0;
                        }
                        run_keys += args.len() / 2;
                        run.push(args);
                        continue;
                    }
                    self.commit_run(shared, &mut run);
                    run_keys = 0;
                    if plain && cmd::is_plain_get(&args) {
                        gets.push(args);
                        if gets.len() >= MAX_GET_RUN {
                            self.answer_gets(shared, &mut gets);
                        }
                        continue;
                    }
                    self.answer_gets(shared, &mut gets);
                    let mut ctx = Ctx {
                        shared,
                        session: &mut self.session,
                        out: &mut self.out,
                        exec: None,
                    };
                    cmd::dispatch(&mut ctx, &args);
                    if self.session.blocking.parked.is_some() {
                        // Parked: nothing more until woken or timed out.
                        self.blocked_args = Some(args);
                        break;
                    }
                    self.parser.recycle(args);
                    if self.session.psync.is_some() {
                        self.become_replica_link(shared);
                    }
                    if self.session.quit {
                        stop = true;
                        break;
                    }
                    if self.session.hold_until.is_some() {
                        // A slowed AUTH: nothing more until the loop's timer.
                        break;
                    }
                }
                Ok(None) => {
                    exhausted = true;
                    break;
                }
                Err(e) => {
                    self.commit_run(shared, &mut run);
                    self.answer_gets(shared, &mut gets);
                    self.out.error(&e.to_string());
                    stop = true;
                    break;
                }
            }
        }
        self.answer_gets(shared, &mut gets);
        self.flush_posts(shared, local);
        if stop || (self.eof && exhausted) {
            self.state = State::Closing;
        } else if self.parser.held().saturating_add(self.end - self.pos) > self.max_held {
            self.commit_run(shared, &mut run);
            self.out
                .error("ERR Protocol error: query buffer limit exceeded");
            self.state = State::Closing;
        }
        if !run.is_empty() {
            // The loop's group writes database 0.
            if self.state == State::Open && self.session.db == 0 {
                group.owners.push((self.token, run.len()));
                group.keys += run_keys;
                group.sets.append(&mut run);
                self.in_group = true;
            } else {
                self.commit_run(shared, &mut run);
            }
        }
        if self.session.blocking.parked.is_some() && self.state == State::Open {
            self.check_parked();
        }
        // Shrink after a burst of large replies.
        if self.unsent() == 0 && self.out.buf.capacity() > 4 * OUT_HIGH_WATER {
            self.out.buf = Vec::new();
            self.sent = 0;
        }
    }

    /// Commits this connection's own run of plain SETs and queues replies.
    /// Answers the plain GETs gathered by `run_requests`, in order.
    fn answer_gets(&mut self, shared: &Shared, gets: &mut Vec<Args>) {
        if gets.is_empty() {
            return;
        }
        let started = Instant::now();
        cmd::answer_gets(&shared.store.view(self.session.db), gets, &mut self.out);
        let ix = self.session.me.loop_ix as usize;
        let each = started.elapsed() / gets.len() as u32;
        let who = client_label(&self.session);
        cmd::count_plain(shared, ix, gets, each, false, who);
        for args in gets.drain(..) {
            self.parser.recycle(args);
        }
    }

    fn commit_run(&mut self, shared: &Shared, run: &mut Vec<Args>) {
        if run.is_empty() {
            return;
        }
        let started = Instant::now();
        let r = cmd::commit_sets(&shared.store.view(self.session.db), run);
        let ix = self.session.me.loop_ix as usize;
        let each = started.elapsed() / run.len() as u32;
        let who = client_label(&self.session);
        cmd::count_plain(shared, ix, run, each, r.is_err(), who);
        cmd::reply_sets(&mut self.out, run.len(), &r);
        for args in run.drain(..) {
            self.parser.recycle(args);
        }
    }

    /// Writes queued replies until done or the socket is full.
    fn write_out(&mut self) {
        if self.session.hold_until.is_some() {
            return;
        }
        while self.sent < self.out.buf.len() {
            match self.stream.write(&self.out.buf[self.sent..]) {
                Ok(0) => {
                    self.close();
                    return;
                }
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.close();
                    return;
                }
            }
        }
        self.out.buf.clear();
        self.sent = 0;
    }

    fn start_linger(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        self.state = State::Lingering {
            until: Instant::now() + LINGER,
            left: LINGER_BYTES,
        };
    }

    fn discard_input(&mut self) {
        let State::Lingering { until, left } = self.state else {
            return;
        };
        let mut sink = [0u8; 16 << 10];
        match self.stream.read(&mut sink) {
            Ok(0) => self.close(),
            Ok(n) if n >= left => self.close(),
            Ok(n) => {
                self.state = State::Lingering {
                    until,
                    left: left - n,
                }
            }
            Err(e) if is_transient(&e) => {}
            Err(_) => self.close(),
        }
    }
}

fn client_label(s: &Session) -> (&str, &[u8]) {
    (s.info.as_ref().map_or("", |i| i.addr.as_str()), &s.name)
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::keyspace::Store;
    use crate::{Config, SyncMode};

    /// Sets a socket buffer size (which also turns off the kernel's
    /// autotuning of it), so that a few replies fill the socket.
    fn small_buffer(s: &TcpStream, which: libc::c_int) {
        use std::os::fd::AsRawFd;
        let size: libc::c_int = 64 << 10;
        // SAFETY: `size` is a live c_int for the duration of the call, and
        // its length is passed; the fd is open (owned by `s`).
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                which,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "setsockopt: {}", io::Error::last_os_error());
    }

    fn encode(args: &[&[u8]]) -> Vec<u8> {
        let mut v = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            v.extend_from_slice(a);
            v.extend_from_slice(b"\r\n");
        }
        v
    }

    /// Reads whatever the client socket holds; returns the byte count.
    fn drain(client: &mut TcpStream) -> usize {
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0;
        loop {
            match client.read(&mut buf) {
                Ok(0) => return total,
                Ok(n) => total += n,
                Err(e) if is_transient(&e) => return total,
                Err(e) => panic!("client read: {e}"),
            }
        }
    }

    /// A connection paused at the high-water mark, whose client then takes
    /// every reply before the loop looks again (here: while the loop
    /// finishes its wake-up with `after_group`), has requests left in its
    /// buffer and nothing new to read. It must still ask for an event that
    /// comes, and answer them all. Driven like the level-triggered loop:
    /// readable when it wants to read and input waits, writable when it
    /// wants to write (the drained socket has room).
    #[test]
    fn a_paused_connection_whose_client_takes_every_reply_answers_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
        let config = Config {
            save_dir: Some(dir.path().join("saves")),
            ..Config::default()
        };
        let shared = Shared::new(
            Store::new(db, SyncMode::No, 16).unwrap(),
            config,
            0,
            Arc::new(crate::server::Stop::default()),
        )
        .unwrap();
        let value = vec![b'v'; 256 << 10];
        cmd::commit_sets(
            &shared.store.view(0),
            &[vec![b"SET".to_vec(), b"big".to_vec(), value]],
        )
        .unwrap();

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        small_buffer(&server, libc::SO_SNDBUF);
        server.set_nonblocking(true).unwrap();
        server.set_nodelay(true).unwrap(); // as the loop sets it
        const N: usize = 64;
        let get = encode(&[b"GET", b"big"]);
        client.write_all(&get.repeat(N)).unwrap();
        client.set_nonblocking(true).unwrap();
        let reply_len = format!("${}\r\n", 256 << 10).len() + (256 << 10) + 2;

        let mut conn = Conn::new(&shared, server, 2, 1, 0);
        let mut group = PendingSets::default();
        let mut local = Vec::new();
        // Wait for the requests to reach the server's socket, then run.
        let mut received = 0;
        for _ in 0..1000 {
            conn.on_ready(&shared, true, false, &mut group, &mut local);
            if conn.unsent() > 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(conn.paused, "the setup must pause the connection");
        // The client takes every reply while the loop ends its wake-up.
        while conn.unsent() > 0 {
            received += drain(&mut client);
            conn.after_group();
        }
        assert!(conn.pos < conn.end, "requests are left in the buffer");

        for _ in 0..1_000_000 {
            received += drain(&mut client);
            if received == N * reply_len {
                break;
            }
            let want = conn.wanted_interest();
            // No more input comes: readable only if unread input waits.
            let readable = want.read && conn.stream.peek(&mut [0u8; 1]).is_ok();
            assert!(
                readable || want.write,
                "stuck: {} of {N} replies sent, requests left, no event asked for",
                received / reply_len
            );
            conn.on_ready(&shared, readable, want.write, &mut group, &mut local);
            conn.after_group();
        }
        assert_eq!(received, N * reply_len);
    }
}
