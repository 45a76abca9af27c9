//! Delivery between connections: "deliver to / wake connection N".
//!
//! A connection lives on one event loop for life and only that loop's
//! thread touches it. Anything that must reach a connection from elsewhere
//! (a `PUBLISH` on another loop, `CLIENT KILL`, a `MONITOR` feed, later a
//! push that wakes a client parked in `BLPOP`) is a [`Delivery`] posted to
//! the connection's [`ClientRef`]: it goes into the loop's [`Mailbox`], and
//! the loop's eventfd is written if the mailbox was empty. The loop takes
//! the whole mailbox when it wakes and hands each delivery to its
//! connection before it sends the replies of that wake-up.
//!
//! # Contract
//!
//! * **Order.** Deliveries posted by one thread to one connection arrive in
//!   the order posted (a mailbox is a FIFO, and a poster's batch is appended
//!   whole). Deliveries from different threads have no order between them.
//! * **At most once, never to a stranger.** A delivery names the connection
//!   by loop, slot *and* client id; a connection that closed (its slot maybe
//!   reused) drops it. Nothing tells the poster: a poster that must know
//!   (a blocking pop handing over an element) keeps the element itself and
//!   only *wakes* the client ([`Delivery::Wake`]), which then takes it on
//!   its own loop; a wake-up that reaches nobody is passed on by the
//!   departing client instead ([`crate::blocking`]).
//! * **Cost.** Posting is one uncontended lock of the target loop's mailbox
//!   and at most one `write` to its eventfd per time the loop drains it; a
//!   connection batches the posts of one wake-up per target loop
//!   ([`Postal::post_all`]). Deliveries to the poster's own loop skip the
//!   mailbox (the event loop keeps them in a local list).
//! * **Wake-up latency.** A loop drains its mailbox on the wake-up the
//!   eventfd causes, so a delivery reaches its client within one
//!   `epoll_wait` of the post, whatever the loop was doing.
//! * **Before the poster's reply.** A connection posts what its requests
//!   produced before any of their replies is written, so a client that has
//!   the reply to its `PUBLISH` knows every receiver's mailbox holds the
//!   message.

use std::net::TcpStream;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::poll::Waker;
use crate::pubsub::Message;

/// Names one connection: its loop, its slot there, and its client id (the
/// id guards against a slot reused by a later connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClientRef {
    /// Index of the event loop that owns the connection.
    pub loop_ix: u32,
    /// The connection's slot in that loop.
    pub slot: u32,
    /// The client id (`CLIENT ID`).
    pub id: u64,
}

/// What can be delivered to a connection.
#[derive(Debug, Clone)]
pub enum Delivery {
    /// A pub/sub message, encoded once for all its receivers.
    Message(Arc<Message>),
    /// A `MONITOR` line, encoded (a RESP simple string).
    Monitor(Arc<[u8]>),
    /// Close the connection without sending what it has queued
    /// (`CLIENT KILL`).
    Kill,
    /// A key the connection waits on in a blocking pop got elements: it
    /// re-runs its command ([`crate::blocking`]). The elements stay in the
    /// key until it takes them.
    Wake(Wake),
    /// `CLIENT UNBLOCK`: unpark the connection from the parking named
    /// (if it is still in it) with the timeout reply or an error.
    Unblock(Unblock),
}

/// What `CLIENT UNBLOCK` asks of a parked connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unblock {
    /// The parking it saw ([`crate::blocking::Parked::ticket`]): a
    /// connection served (or timed out, or parked again) since ignores it.
    pub ticket: u64,
    /// `ERROR`: reply `-UNBLOCKED ...`; else the timeout reply.
    pub error: bool,
}

/// Which key woke a parked connection, and which parking of it the waker
/// found registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// The key's database.
    pub db: usize,
    /// The key.
    pub key: Vec<u8>,
    /// The parking's [`crate::blocking::Waiter::ticket`].
    pub ticket: u64,
}

/// A delivery on its way to a loop: the target slot and id, and what.
#[derive(Debug)]
pub(crate) struct Post {
    pub slot: u32,
    pub id: u64,
    pub what: Delivery,
}

/// What other threads may hand one loop.
pub(crate) struct Mailbox {
    pub waker: Waker,
    /// New connections dealt to this loop, with their client ids.
    pub new_conns: Mutex<Vec<(TcpStream, u64)>>,
    posts: Mutex<Vec<Post>>,
}

/// Keeps each loop's mailbox on cache lines of its own: posters to one
/// loop do not slow posters to another.
#[repr(align(128))]
struct Padded<T>(T);

/// Every loop's mailbox.
pub struct Postal {
    boxes: Box<[Padded<Mailbox>]>,
}

impl Postal {
    /// Mailboxes for `loops` event loops.
    pub(crate) fn new(loops: usize) -> std::io::Result<Postal> {
        let mut boxes = Vec::with_capacity(loops);
        for _ in 0..loops {
            boxes.push(Padded(Mailbox {
                waker: Waker::new()?,
                new_conns: Mutex::new(Vec::new()),
                posts: Mutex::new(Vec::new()),
            }));
        }
        Ok(Postal {
            boxes: boxes.into_boxed_slice(),
        })
    }

    /// The number of loops.
    pub fn loops(&self) -> usize {
        self.boxes.len()
    }

    pub(crate) fn mailbox(&self, loop_ix: usize) -> &Mailbox {
        &self.boxes[loop_ix].0
    }

    /// Delivers `what` to the connection `to` and wakes its loop (see the
    /// module's contract). A `to` that names no loop is ignored.
    pub fn post(&self, to: ClientRef, what: Delivery) {
        self.post_all(
            to.loop_ix as usize,
            std::iter::once(Post {
                slot: to.slot,
                id: to.id,
                what,
            }),
        );
    }

    /// Appends `posts` to one loop's mailbox under one lock and wakes the
    /// loop if the mailbox was empty (a non-empty one has a wake-up
    /// pending: the loop resets its eventfd before it takes the mailbox).
    pub(crate) fn post_all(&self, loop_ix: usize, posts: impl Iterator<Item = Post>) {
        let Some(mb) = self.boxes.get(loop_ix) else {
            return;
        };
        let mb = &mb.0;
        let was_empty = {
            let mut q = mb.posts.lock();
            let was_empty = q.is_empty();
            q.extend(posts);
            was_empty && !q.is_empty()
        };
        if was_empty {
            mb.waker.wake();
        }
    }

    /// Moves the loop's posts into `into` (in order). The caller reset the
    /// loop's eventfd first, so a post after this take wakes it again.
    pub(crate) fn take(&self, loop_ix: usize, into: &mut Vec<Post>) {
        let mut q = self.boxes[loop_ix].0.posts.lock();
        if into.is_empty() {
            std::mem::swap(&mut *q, into);
        } else {
            into.append(&mut q);
        }
    }
}
