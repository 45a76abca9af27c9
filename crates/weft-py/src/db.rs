//! `weft.Db`: an open database. A subclass of `weft.Keyspace` (it is its
//! default keyspace) with the calls on the whole database.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};
use weft::CloseOptions;

use crate::batch::WriteBatch;
use crate::codec::{Codec, Codecs};
use crate::errors::{types, IntoPyResult};
use crate::keyspace::Keyspace;
use crate::snapshot::Snapshot;
use crate::stats;
use crate::store::{write_options, Store};
use crate::transaction::Transaction;

/// An open database (`weft.open(path, ...)`): the default keyspace's
/// dict-like API (see `Keyspace`) plus snapshots, batches, transactions,
/// keyspaces, maintenance and statistics. Use it as a context manager, or
/// call `close()`; the last reference going away closes it too. Share one
/// `Db` between threads: every call that may block or take long releases
/// the GIL.
#[pyclass(frozen, extends = Keyspace, module = "weft")]
pub struct Db {
    /// The default keyspace, as the base class holds it.
    store: Store,
    closed: AtomicBool,
}

impl Db {
    /// The Python object for an opened database.
    pub fn create(py: Python<'_>, store: Store) -> PyResult<Bound<'_, Db>> {
        let init = PyClassInitializer::from(Keyspace {
            store: store.clone(),
        })
        .add_subclass(Db {
            store,
            closed: AtomicBool::new(false),
        });
        Bound::new(py, init)
    }

    fn db(&self) -> &weft::Db {
        &self.store.db
    }
}

#[pymethods]
impl Db {
    /// The directory the database lives in (a str, as the errors' paths).
    #[getter]
    fn path(&self) -> String {
        self.db().path().to_string_lossy().into_owned()
    }

    /// True when opened with `read_only=True`.
    #[getter]
    fn read_only(&self) -> bool {
        self.db().is_read_only()
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes the database for every handle (keyspaces, iterators and
    /// snapshots then raise ClosedError): with `flush=True` (the default)
    /// the memtables are written to tables first, so writes made with
    /// `disable_wal=True` survive; then background work stops, the logs are
    /// synced and the directory lock is released. Idempotent.
    #[pyo3(signature = (*, flush = true))]
    fn close(&self, py: Python<'_>, flush: bool) -> PyResult<()> {
        self.closed.store(true, Ordering::Release);
        let db = self.db().clone();
        py.detach(|| db.close_with(&CloseOptions::new().flush(flush)))
            .py()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the database (flushing), whatever ended the block.
    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyType>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py, true)?;
        Ok(false)
    }

    /// A point-in-time view (see `Snapshot`).
    fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.store.clone(), self.db().snapshot())
    }

    /// A write batch bound to this database: `with db.batch() as b:` writes
    /// it atomically when the block ends without an exception.
    #[pyo3(signature = (*, sync = false, disable_wal = false))]
    fn batch(&self, sync: bool, disable_wal: bool) -> WriteBatch {
        WriteBatch::bound(
            self.store.codecs,
            self.db().clone(),
            write_options(sync, disable_wal),
        )
    }

    /// Applies `batch` atomically (after any crash, all of it or none) and
    /// empties it. `sync=True` returns once it is on stable storage.
    #[pyo3(signature = (batch, *, sync = false, disable_wal = false))]
    fn write(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, WriteBatch>,
        sync: bool,
        disable_wal: bool,
    ) -> PyResult<()> {
        let b = batch.get().take();
        let opts = write_options(sync, disable_wal);
        py.detach(|| self.db().write(b, &opts)).py()
    }

    /// Begins an optimistic transaction (see `Transaction`); its commit
    /// writes with `sync` / `disable_wal`.
    #[pyo3(signature = (*, sync = false, disable_wal = false))]
    fn transaction(&self, sync: bool, disable_wal: bool) -> Transaction {
        Transaction::begin(&self.store, write_options(sync, disable_wal))
    }

    /// Runs `func(txn)` in a transaction and commits it, running it again
    /// from the start (a new transaction at a new snapshot) when the commit
    /// raises ConflictError, up to `max_attempts` runs; returns what `func`
    /// returned. An exception from `func` rolls back and propagates.
    #[pyo3(signature = (func, *, max_attempts = weft::DEFAULT_TRANSACTION_ATTEMPTS, sync = false, disable_wal = false))]
    fn transact<'py>(
        &self,
        py: Python<'py>,
        func: &Bound<'py, PyAny>,
        max_attempts: usize,
        sync: bool,
        disable_wal: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let conflict = types(py)?.conflict.bind(py);
        let opts = write_options(sync, disable_wal);
        let mut attempt = 1;
        loop {
            let txn = Bound::new(py, Transaction::begin(&self.store, opts))?;
            match func.call1((&txn,)) {
                Err(e) => {
                    txn.get().rollback_inner()?;
                    if !(e.is_instance(py, conflict) && attempt < max_attempts) {
                        return Err(e);
                    }
                }
                Ok(value) => match txn.get().commit_inner(py)? {
                    Ok(()) => return Ok(value),
                    Err(e) if e.is_conflict() && attempt < max_attempts => {}
                    Err(e) => return Err(e).py(),
                },
            }
            attempt += 1;
            // Let the writer that won run on (as weft::Db::transact does).
            py.detach(std::thread::yield_now);
        }
    }

    /// The handle of keyspace `name`, creating it (one durable write) if it
    /// does not exist; `"default"` is this database's own keys. It takes
    /// the database's codecs unless `codec=` / `key_codec=` / `value_codec=`
    /// say otherwise (as `weft.open`'s; the handle's, not stored).
    #[pyo3(signature = (name, *, codec = None, key_codec = None, value_codec = None))]
    fn keyspace<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        codec: Option<&str>,
        key_codec: Option<&str>,
        value_codec: Option<&str>,
    ) -> PyResult<Bound<'py, Keyspace>> {
        let base = match codec {
            Some(c) => {
                let c = Codec::parse(c, "codec")?;
                Codecs { keys: c, values: c }
            }
            None => self.store.codecs,
        };
        let side = |name: Option<&str>, what, default| match name {
            Some(n) => Codec::parse(n, what),
            None => Ok(default),
        };
        let codecs = Codecs {
            keys: side(key_codec, "key_codec", base.keys)?,
            values: side(value_codec, "value_codec", base.values)?,
        };
        let ks = py.detach(|| self.db().keyspace(name)).py()?;
        let store = Store {
            db: self.db().clone(),
            ks,
            codecs,
        };
        Bound::new(py, Keyspace { store })
    }

    /// The keyspaces' names: "default" first, the others sorted.
    fn keyspaces(&self) -> Vec<String> {
        self.db().keyspaces()
    }

    /// Drops keyspace `name` and everything in it with one write; its
    /// handles raise InvalidArgumentError from then on.
    fn drop_keyspace(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        py.detach(|| self.db().drop_keyspace(name)).py()
    }

    /// Writes the memtables to tables and waits until they are durable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.db().flush()).py()
    }

    /// Flushes, then merges every partition into its sorted store, and
    /// waits.
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.db().compact()).py()
    }

    /// Verifies every checksum of every live file; returns what was checked
    /// (`{"files", "blocks", "bytes"}`) or raises CorruptionError naming the
    /// file and offset.
    fn check<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = py.detach(|| self.db().verify_checksums()).py()?;
        stats::check_report(py, &report)
    }

    /// Makes every write acknowledged so far durable (fsync of the log).
    fn sync_wal(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.db().sync_wal()).py()
    }

    /// Hands writes buffered by `manual_wal_flush=True` to the OS.
    fn flush_wal(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.db().flush_wal()).py()
    }

    /// Writes a consistent copy of the live database into `path` (which
    /// must not exist), openable on its own; returns what it made
    /// (`sequence`, `files_linked`, `bytes_linked`, `files_copied`,
    /// `bytes_copied`).
    fn checkpoint<'py>(&self, py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let info = py.detach(|| self.db().checkpoint(&path)).py()?;
        stats::checkpoint_info(py, &info)
    }

    /// A read-only database (`read_only=True`): catches up with the
    /// writer's latest state. Iterators made before keep their view.
    fn refresh(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.db().refresh()).py()
    }

    /// Engine statistics as a dict (counters since this open, and under
    /// "lifetime" over every open).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| self.db().stats());
        stats::stats(py, &s)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { " closed" } else { "" };
        format!(
            "<weft.Db {:?}{}{state}>",
            self.db().path().display().to_string(),
            if self.read_only() { " read-only" } else { "" }
        )
    }
}
