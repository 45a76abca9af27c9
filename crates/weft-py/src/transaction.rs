//! `db.transaction()` and `db.transact(fn)`: the engine's optimistic
//! transactions.
//!
//! `weft::Transaction<'db>` borrows its `Db`, while a Python object must
//! own what it holds. `TxnCell` (a `self_cell`, a well-kept crate for
//! exactly this) owns a `Db` clone together with the transaction borrowing
//! it; the transaction sits in an `Option` because committing consumes it.

use std::ops::Bound as RangeBound;

use parking_lot::Mutex;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple, PyType};
use weft::{TransactionOptions, WriteOptions};

use crate::codec::Codecs;
use crate::errors::{busy, invalid_argument, IntoPyResult};
use crate::keyspace::Keyspace;
use crate::store::{Store, GET_RELEASES_GIL};

type Slot<'db> = Option<weft::Transaction<'db>>;

self_cell::self_cell!(
    struct TxnCell {
        owner: weft::Db,
        #[covariant]
        dependent: Slot,
    }
);

/// An optimistic transaction (`db.transaction()`): reads at a snapshot
/// taken at its start, with its own writes merged in; writes buffered
/// until `commit()`, which applies them atomically or raises
/// `weft.ConflictError` (and writes nothing) when a key it wrote, or read
/// with `get_for_update`, was written by someone else after its snapshot.
/// `with db.transaction() as txn:` commits when the block ends without an
/// exception and rolls back otherwise. Every call takes `keyspace=` (a
/// handle from `db.keyspace(name)`; the default keyspace without one): one
/// commit spans keyspaces atomically. One thread at a time: a call while
/// another thread is inside one raises RuntimeError.
#[pyclass(frozen, module = "weft")]
pub struct Transaction {
    /// Locked with `try_lock` only: a thread that blocked here holding the
    /// GIL while the holder waits for the GIL to return would deadlock.
    cell: Mutex<TxnCell>,
    /// The default keyspace and its codecs: what a call without
    /// `keyspace=` reads and writes.
    default: (weft::Keyspace, Codecs),
}

const FINISHED: &str = "the transaction was already committed or rolled back";

impl Transaction {
    pub fn begin(store: &Store, opts: WriteOptions) -> Self {
        let topts = TransactionOptions::new().write_options(opts);
        Transaction {
            cell: Mutex::new(TxnCell::new(store.db.clone(), |db| {
                Some(db.transaction_opt(&topts))
            })),
            default: (store.ks.clone(), store.codecs),
        }
    }

    /// The keyspace a call names (the default one without `keyspace=`)
    /// and its codecs.
    fn target(&self, keyspace: Option<&Bound<'_, Keyspace>>) -> (weft::Keyspace, Codecs) {
        match keyspace {
            Some(ks) => {
                let store = &ks.get().store;
                (store.ks.clone(), store.codecs)
            }
            None => self.default.clone(),
        }
    }

    /// Runs `f` on the live transaction, the GIL released when `detach`.
    fn run<R: Send>(
        &self,
        py: Python<'_>,
        detach: bool,
        f: impl for<'db> FnOnce(&mut weft::Transaction<'db>) -> weft::Result<R> + Send,
    ) -> PyResult<R> {
        let mut cell = self
            .cell
            .try_lock()
            .ok_or_else(|| busy("the transaction"))?;
        let cell: &mut TxnCell = &mut cell;
        let call = move || {
            cell.with_dependent_mut(|_, slot| match slot {
                Some(txn) => Ok(f(txn)),
                None => Err(()),
            })
        };
        let r = if detach { py.detach(call) } else { call() };
        match r {
            Ok(r) => r.py(),
            Err(()) => Err(invalid_argument(FINISHED)),
        }
    }

    /// Commits, returning the engine's error (for `transact`'s retries).
    pub fn commit_inner(&self, py: Python<'_>) -> PyResult<weft::Result<()>> {
        let mut cell = self
            .cell
            .try_lock()
            .ok_or_else(|| busy("the transaction"))?;
        let cell: &mut TxnCell = &mut cell;
        let txn = cell.with_dependent_mut(|_, slot| slot.take().map(|t| py.detach(|| t.commit())));
        txn.ok_or_else(|| invalid_argument(FINISHED))
    }

    pub fn rollback_inner(&self) -> PyResult<()> {
        let mut cell = self
            .cell
            .try_lock()
            .ok_or_else(|| busy("the transaction"))?;
        cell.with_dependent_mut(|_, slot| slot.take());
        Ok(())
    }

    fn read<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        for_update: bool,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (ks, codecs) = self.target(keyspace);
        let found = self.read_raw(key, for_update, ks, codecs)?;
        found
            .map(|v| codecs.values.decode(key.py(), &v))
            .transpose()
    }

    fn read_raw(
        &self,
        key: &Bound<'_, PyAny>,
        for_update: bool,
        ks: weft::Keyspace,
        codecs: Codecs,
    ) -> PyResult<Option<Vec<u8>>> {
        let k = codecs.keys.encode(key, "key")?.into_owned();
        self.run(key.py(), GET_RELEASES_GIL, move |t| match for_update {
            true => t.get_for_update_in(&ks, &k),
            false => t.get_in(&ks, &k),
        })
    }
}

#[pymethods]
impl Transaction {
    /// The value of `key` (in `keyspace` when given) at the transaction's
    /// snapshot with its own writes merged in, or `default`. Not tracked:
    /// the commit does not check it (use `get_for_update` for keys the
    /// writes depend on).
    #[pyo3(signature = (key, default = None, *, keyspace = None))]
    fn get<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(self.read(key, false, keyspace)?.or(default))
    }

    /// As `get`, and the commit fails with ConflictError if `key` was
    /// written after the snapshot (the transaction is then serializable
    /// with respect to it).
    #[pyo3(signature = (key, *, keyspace = None))]
    fn get_for_update<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.read(key, true, keyspace)
    }

    fn __getitem__<'py>(&self, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match self.read(key, false, None)? {
            Some(v) => Ok(v),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let (ks, codecs) = self.target(None);
        Ok(self.read_raw(key, false, ks, codecs)?.is_some())
    }

    /// Buffers a put (seen by this transaction's reads at once).
    #[pyo3(signature = (key, value, *, keyspace = None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (ks, codecs) = self.target(keyspace);
        let k = codecs.keys.encode(key, "key")?.into_owned();
        let v = codecs.values.encode(value, "value")?.into_owned();
        self.run(key.py(), false, move |t| t.put_in(&ks, &k, &v))
    }

    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(key, value, None)
    }

    /// Buffers a delete.
    #[pyo3(signature = (key, *, keyspace = None))]
    fn delete(
        &self,
        key: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (ks, codecs) = self.target(keyspace);
        let k = codecs.keys.encode(key, "key")?.into_owned();
        self.run(key.py(), false, move |t| t.delete_in(&ks, &k))
    }

    fn __delitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(key, None)
    }

    /// The `(key, value)` pairs in `[start, stop)` (of `keyspace` when
    /// given) at the snapshot with the transaction's writes merged in, as
    /// a list (materialized: the pairs borrow the transaction). Not
    /// tracked, as `get`.
    #[pyo3(signature = (*, start = None, stop = None, reverse = false, keyspace = None))]
    fn items<'py>(
        &self,
        py: Python<'py>,
        start: Option<&Bound<'py, PyAny>>,
        stop: Option<&Bound<'py, PyAny>>,
        reverse: bool,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let (ks, codecs) = self.target(keyspace);
        let bound = |b: Option<&Bound<'py, PyAny>>, what| -> PyResult<RangeBound<Vec<u8>>> {
            Ok(match b {
                Some(k) => RangeBound::Included(codecs.keys.encode(k, what)?.into_owned()),
                None => RangeBound::Unbounded,
            })
        };
        let lower = bound(start, "start")?;
        let upper = match bound(stop, "stop")? {
            RangeBound::Included(k) => RangeBound::Excluded(k),
            other => other,
        };
        let mut pairs = self.run(py, true, move |t| {
            t.range_in(&ks, (lower, upper))?
                .collect::<weft::Result<Vec<_>>>()
        })?;
        if reverse {
            pairs.reverse();
        }
        let out = PyList::empty(py);
        for (k, v) in pairs {
            out.append(PyTuple::new(
                py,
                [codecs.keys.decode(py, &k)?, codecs.values.decode(py, &v)?],
            )?)?;
        }
        Ok(out)
    }

    /// Applies the writes atomically, or raises ConflictError and writes
    /// nothing. The transaction is finished either way.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.commit_inner(py)?.py()
    }

    /// Discards the writes (idempotent).
    fn rollback(&self) -> PyResult<()> {
        self.rollback_inner()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits when the block ended without an exception (raising
    /// ConflictError if it conflicts), rolls back otherwise.
    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some() {
            self.rollback_inner()?;
            return Ok(false);
        }
        // A transaction the block finished itself commits nothing more.
        let finished = match self.cell.try_lock() {
            Some(mut cell) => cell.with_dependent_mut(|_, slot| slot.is_none()),
            None => return Err(busy("the transaction")),
        };
        if !finished {
            self.commit(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.cell.try_lock() {
            Some(mut cell) => cell.with_dependent_mut(|_, slot| match slot {
                Some(t) => format!("<weft.Transaction snapshot={}>", t.snapshot().sequence()),
                None => "<weft.Transaction finished>".to_string(),
            }),
            None => "<weft.Transaction in use>".to_string(),
        }
    }
}
