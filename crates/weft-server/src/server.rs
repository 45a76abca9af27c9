//! The listener, the event loops ([`crate::event_loop`]), the background
//! threads (expiry, `everysec` fsync) and graceful shutdown.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::keyspace::Store;
use crate::{event_loop, Config, Error, Shared, SyncMode};

const EXPIRE_EVERY: Duration = Duration::from_millis(100);
const EXPIRE_BATCH: usize = 1000;

/// Stop flag with a condition variable, so sleeping threads wake at once.
#[derive(Default)]
pub(crate) struct Stop {
    flag: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Stop {
    pub(crate) fn stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    pub(crate) fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        let _g = self.lock.lock();
        self.cv.notify_all();
    }

    /// Sleeps up to `d`; true if stopping.
    pub(crate) fn sleep(&self, d: Duration) -> bool {
        let mut g = self.lock.lock();
        if self.stopped() {
            return true;
        }
        self.cv.wait_for(&mut g, d);
        self.stopped()
    }
}

/// Asks a running server to shut down gracefully. Cheap to clone.
#[derive(Clone)]
pub struct ShutdownHandle {
    stop: Arc<Stop>,
}

impl ShutdownHandle {
    /// Starts the shutdown: [`Server::run`] stops accepting, lets every
    /// connection finish the requests it has read, waits for a background
    /// save, flushes and closes the database, and returns.
    pub fn shutdown(&self) {
        self.stop.stop();
    }
}

/// A bound server: [`Server::bind`], print [`Server::local_addr`], then
/// [`Server::run`] until a [`ShutdownHandle`] fires.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: Arc<Stop>,
    addr: SocketAddr,
}

/// The longest `Config::busy_poll` accepted: polling is for the gaps
/// between a client's requests, microseconds, not for idle time.
const MAX_BUSY_POLL: Duration = Duration::from_secs(1);

impl Server {
    /// Opens the database and binds the listener.
    pub fn bind(config: Config) -> Result<Server, Error> {
        if config.maxclients == 0 {
            return Err(Error::Config("maxclients must be at least 1".into()));
        }
        if config.threads == 0 {
            return Err(Error::Config("threads must be at least 1".into()));
        }
        if config.max_bulk == 0 {
            return Err(Error::Config("max bulk length must be at least 1".into()));
        }
        if config.busy_poll > MAX_BUSY_POLL {
            return Err(Error::Config(format!(
                "busy poll must be at most {} µs, got {} µs",
                MAX_BUSY_POLL.as_micros(),
                config.busy_poll.as_micros()
            )));
        }
        let listener = TcpListener::bind((config.bind.as_str(), config.port))
            .map_err(|e| Error::io(format!("binding {}:{}", config.bind, config.port), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("reading the bound address", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("configuring the listener", e))?;
        // Replies go out only after the loop's `flush_wal` (see
        // `event_loop`), so the WAL records of a wake-up's writes can wait
        // for that one `write`. `always` syncs every write anyway.
        let db_options = config
            .db_options
            .clone()
            .manual_wal_flush(config.sync != SyncMode::Always);
        if crate::exposed(&config.bind) && config.requirepass.is_none() {
            warn_exposed(addr);
        }
        let db = weft::Db::open(&config.dir, db_options)?;
        let stop = Arc::new(Stop::default());
        let store = Store::new(db, config.sync, config.databases)?;
        let repl = crate::repl::open(&store, &config)?;
        let mut shared = Shared::new(store, config, addr.port(), Arc::clone(&stop))?;
        shared.repl = Arc::new(repl);
        let shared = Arc::new(shared);
        Ok(Server {
            listener,
            shared,
            stop,
            addr,
        })
    }

    /// The address actually bound (the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle that stops [`Server::run`].
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            stop: Arc::clone(&self.stop),
        }
    }

    /// Serves until shut down, then stops gracefully: no new connections;
    /// each connection's read side is shut so it finishes what it has read,
    /// replies and exits; background threads stop; the database is flushed
    /// and closed.
    pub fn run(self) -> Result<(), Error> {
        let Server {
            listener,
            shared,
            stop,
            addr: _,
        } = self;
        let mut background = Vec::new();
        background.push(spawn_bg("weft-expire", &shared, &stop, |sh, stop| {
            while !stop.sleep(EXPIRE_EVERY) {
                // A replica's expired keys are deleted by its primary's
                // stream (reads hide them meanwhile).
                if sh.repl.is_replica() {
                    continue;
                }
                loop {
                    let mut publish = || {
                        if sh.store.notify.effective() != 0 {
                            crate::notify::post_pending(sh);
                        }
                    };
                    match sh.store.expire_cycle(EXPIRE_BATCH, &mut publish) {
                        Ok(n) if n >= EXPIRE_BATCH && !stop.stopped() => continue,
                        Ok(_) => break,
                        Err(e) => {
                            eprintln!("weft serve: background expiry: {e:?}");
                            break;
                        }
                    }
                }
            }
        })?);
        if shared.config.sync == SyncMode::EverySec {
            background.push(spawn_bg("weft-fsync", &shared, &stop, |sh, stop| loop {
                let stopping = stop.sleep(Duration::from_secs(1));
                if let Err(e) = sh.store.sync_if_dirty() {
                    eprintln!("weft serve: background fsync: {e:?}");
                }
                if stopping {
                    break;
                }
            })?);
        }
        background.push(crate::repl::start(&shared, &stop)?);
        let listener = Arc::new(listener);
        let loops = event_loop::start(&shared, &listener, &stop)?;
        // The loops serve until `stop` fires, then send what they have
        // queued and close their connections.
        let mut failed = None;
        for t in loops {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed = Some(e),
                Err(_) => {
                    failed = Some(Error::Io {
                        context: "an event loop panicked".into(),
                        source: std::io::Error::other("panic"),
                    })
                }
            }
        }
        drop(listener);
        stop.stop();
        for t in background {
            let _ = t.join();
        }
        // A BGSAVE still running finishes before the database closes.
        shared.saves.join();
        let db = shared.store.db.clone();
        let flushed = db.flush();
        let closed = db.close();
        flushed?;
        closed?;
        failed.map_or(Ok(()), Err)
    }
}

/// The warning a server reachable from other machines without a password
/// prints at start: anyone who can reach the port can read, change and
/// delete every key, and `SHUTDOWN` the server.
fn warn_exposed(addr: SocketAddr) {
    eprintln!(
        "weft serve: WARNING: listening on {addr}, beyond loopback, WITHOUT A PASSWORD.\n\
         weft serve: WARNING: anyone who can reach this port can read, change and delete every \
         key and shut the server down.\n\
         weft serve: WARNING: set --requirepass (or CONFIG SET requirepass), or --bind 127.0.0.1."
    );
}

fn spawn_bg(
    name: &str,
    shared: &Arc<Shared>,
    stop: &Arc<Stop>,
    f: fn(&Shared, &Stop),
) -> Result<JoinHandle<()>, Error> {
    let sh = Arc::clone(shared);
    let st = Arc::clone(stop);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || f(&sh, &st))
        .map_err(|e| Error::io(format!("starting thread {name}"), e))
}
