//! The listener, the connection threads, the background threads (expiry,
//! `everysec` fsync) and graceful shutdown.

use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::keyspace::Keyspace;
use crate::{conn, Config, Counters, Error, Shared, SyncMode};

const CONN_STACK: usize = 512 << 10;
const EXPIRE_EVERY: Duration = Duration::from_millis(100);
const EXPIRE_BATCH: usize = 1000;

/// Stop flag with a condition variable, so sleeping threads wake at once.
#[derive(Default)]
struct Stop {
    flag: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Stop {
    fn stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        let _g = self.lock.lock();
        self.cv.notify_all();
    }

    /// Sleeps up to `d`; true if stopping.
    fn sleep(&self, d: Duration) -> bool {
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
    /// connection finish the requests it has read, flushes and closes the
    /// database, and returns.
    pub fn shutdown(&self) {
        self.stop.stop();
    }
}

struct ConnEntry {
    stream: TcpStream,
    thread: Option<JoinHandle<()>>,
}

/// A bound server: [`Server::bind`], print [`Server::local_addr`], then
/// [`Server::run`] until a [`ShutdownHandle`] fires.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: Arc<Stop>,
    addr: SocketAddr,
}

impl Server {
    /// Opens the database and binds the listener.
    pub fn bind(config: Config) -> Result<Server, Error> {
        if config.maxclients == 0 {
            return Err(Error::Config("maxclients must be at least 1".into()));
        }
        if config.max_bulk == 0 {
            return Err(Error::Config("max bulk length must be at least 1".into()));
        }
        let listener = TcpListener::bind((config.bind.as_str(), config.port))
            .map_err(|e| Error::io(format!("binding {}:{}", config.bind, config.port), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("reading the bound address", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("configuring the listener", e))?;
        let db = weft::Db::open(&config.dir, config.db_options.clone())?;
        let shared = Arc::new(Shared {
            ks: Keyspace::new(db, config.sync),
            config,
            port: addr.port(),
            counters: Counters::default(),
            started: Instant::now(),
        });
        Ok(Server {
            listener,
            shared,
            stop: Arc::new(Stop::default()),
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
        let conns: Arc<Mutex<HashMap<u64, ConnEntry>>> = Arc::default();
        let mut background = Vec::new();
        background.push(spawn_bg("weft-expire", &shared, &stop, |sh, stop| {
            while !stop.sleep(EXPIRE_EVERY) {
                loop {
                    match sh.ks.expire_cycle(EXPIRE_BATCH) {
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
                if let Err(e) = sh.ks.sync_if_dirty() {
                    eprintln!("weft serve: background fsync: {e:?}");
                }
                if stopping {
                    break;
                }
            })?);
        }
        let next_id = AtomicU64::new(1);
        while !stop.stopped() {
            match listener.accept() {
                Ok((stream, _)) => {
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    accept(&shared, &conns, stream, id);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    wait_readable(&listener, 100);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    eprintln!("weft serve: accept: {e}");
                    stop.sleep(Duration::from_millis(100));
                }
            }
        }
        drop(listener);

        // Let connections finish what they have read.
        let entries: Vec<ConnEntry> = conns.lock().drain().map(|(_, e)| e).collect();
        for e in &entries {
            let _ = e.stream.set_write_timeout(Some(Duration::from_secs(5)));
            let _ = e.stream.shutdown(Shutdown::Read);
        }
        for mut e in entries {
            if let Some(t) = e.thread.take() {
                let _ = t.join();
            }
        }
        stop.stop();
        for t in background {
            let _ = t.join();
        }
        let db = shared.ks.db.clone();
        let flushed = db.flush();
        let closed = db.close();
        flushed?;
        closed?;
        Ok(())
    }
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

/// Waits until the listener may have a connection, at most `ms`.
fn wait_readable(listener: &TcpListener, ms: i32) {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is one valid pollfd for the duration of the call.
    unsafe {
        libc::poll(&mut p, 1, ms);
    }
}

fn accept(
    shared: &Arc<Shared>,
    conns: &Arc<Mutex<HashMap<u64, ConnEntry>>>,
    mut stream: TcpStream,
    id: u64,
) {
    let c = &shared.counters;
    c.connections.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    if c.connected.load(Ordering::Relaxed) >= shared.config.maxclients as u64 {
        c.rejected.fetch_add(1, Ordering::Relaxed);
        let _ = stream.write_all(b"-ERR max number of clients reached\r\n");
        return;
    }
    if let Some(t) = shared.config.timeout {
        let _ = stream.set_read_timeout(Some(t));
    }
    let Ok(registered) = stream.try_clone() else {
        let _ = stream.write_all(b"-ERR out of resources\r\n");
        return;
    };
    c.connected.fetch_add(1, Ordering::Relaxed);
    // Register before the thread runs so its own removal always finds it.
    let mut map = conns.lock();
    let sh = Arc::clone(shared);
    let cs = Arc::clone(conns);
    let spawned = std::thread::Builder::new()
        .name("weft-conn".into())
        .stack_size(CONN_STACK)
        .spawn(move || {
            conn::serve(&sh, stream, id);
            sh.counters.connected.fetch_sub(1, Ordering::Relaxed);
            // Detach: nobody will join a connection that ended by itself.
            cs.lock().remove(&id);
        });
    match spawned {
        Ok(t) => {
            map.insert(
                id,
                ConnEntry {
                    stream: registered,
                    thread: Some(t),
                },
            );
        }
        Err(_) => {
            c.connected.fetch_sub(1, Ordering::Relaxed);
            let mut s = registered;
            let _ = s.write_all(b"-ERR out of resources\r\n");
        }
    }
}
