//! `db.snapshot()`: a point-in-time view, readable on its own (`snap[k]`,
//! `snap.items()`) or passed as `snapshot=` to a keyspace's reads.

use arc_swap::ArcSwapOption;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyType};
use weft::ReadOptions;

use crate::errors::closed;
use crate::iter::{RawIterator, ScanIterator, Yield};
use crate::store::Store;

/// A point-in-time view of the database (`db.snapshot()`): reads through
/// it see every write acknowledged before it was taken and none after.
/// Read it directly (`snap[k]`, `snap.get`, `snap.items()`, ...: the
/// default keyspace) or pass it as `snapshot=` to any keyspace's reads.
/// `release()` (or leaving a `with` block) lets compaction drop the old
/// versions it keeps; reads after that raise ClosedError.
#[pyclass(frozen, module = "weft")]
pub struct Snapshot {
    store: Store,
    sequence: u64,
    /// `None` once released. An `ArcSwapOption` so that reads from many
    /// threads load it without writing a shared lock word.
    read: ArcSwapOption<ReadOptions>,
}

impl Snapshot {
    pub fn new(store: Store, snapshot: weft::Snapshot) -> Self {
        Snapshot {
            store,
            sequence: snapshot.sequence(),
            read: ArcSwapOption::from_pointee(ReadOptions::new().snapshot(&snapshot)),
        }
    }

    /// Calls `f` with the snapshot's read options; ClosedError once
    /// released.
    pub fn with<R>(&self, f: impl FnOnce(&ReadOptions) -> PyResult<R>) -> PyResult<R> {
        let guard = self.read.load();
        match guard.as_deref() {
            Some(read) => f(read),
            None => Err(closed("the snapshot was released")),
        }
    }
}

#[pymethods]
impl Snapshot {
    /// The sequence number the snapshot reads at.
    #[getter]
    fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The value of `key` at the snapshot, or `default`.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.with(|read| Ok(self.store.get(key, Some(read))?.or(default)))
    }

    /// `snap[key]`; a list of keys reads them all (`get_many`).
    fn __getitem__<'py>(&self, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if key.is_instance_of::<PyList>() {
            return Ok(self.get_many(key.py(), key)?.into_any());
        }
        match self.with(|read| self.store.get(key, Some(read)))? {
            Some(v) => Ok(v),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.with(|read| Ok(self.store.lookup(key, Some(read))?.is_some()))
    }

    /// The values of `keys` at the snapshot, in order (None where absent).
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.with(|read| self.store.get_many(py, keys, Some(read)))
    }

    /// `(key, value)` pairs at the snapshot; see `Db.items`.
    #[pyo3(signature = (*, start = None, stop = None, prefix = None, reverse = false))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<ScanIterator> {
        self.scan(py, start, stop, prefix, reverse, Yield::Items)
    }

    /// Keys at the snapshot; see `Db.keys`.
    #[pyo3(signature = (*, start = None, stop = None, prefix = None, reverse = false))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<ScanIterator> {
        self.scan(py, start, stop, prefix, reverse, Yield::Keys)
    }

    /// Values at the snapshot; see `Db.values`.
    #[pyo3(signature = (*, start = None, stop = None, prefix = None, reverse = false))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<ScanIterator> {
        self.scan(py, start, stop, prefix, reverse, Yield::Values)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<ScanIterator> {
        self.scan(py, None, None, None, false, Yield::Keys)
    }

    /// A raw iterator at the snapshot; see `Db.iter`.
    #[pyo3(signature = (*, start = None, stop = None, prefix = None))]
    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<RawIterator> {
        self.with(|read| {
            let opts = self.store.bounds(start, stop, prefix, Some(read))?;
            let cursor = self.store.cursor(py, &opts)?;
            Ok(RawIterator::new(cursor, self.store.codecs))
        })
    }

    /// Releases the snapshot (idempotent): compaction may drop the old
    /// versions it kept. Iterators made from it keep their own view.
    fn release(&self) {
        self.read.store(None);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyType>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.release();
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.read.load().is_some() {
            ""
        } else {
            ", released"
        };
        format!("<weft.Snapshot sequence={}{state}>", self.sequence)
    }
}

impl Snapshot {
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        what: Yield,
    ) -> PyResult<ScanIterator> {
        self.with(|read| {
            let opts = self.store.bounds(start, stop, prefix, Some(read))?;
            let cursor = self.store.cursor(py, &opts)?;
            Ok(ScanIterator::new(cursor, self.store.codecs, what, reverse))
        })
    }
}

/// Calls `f` with the read options of a `snapshot=` argument (`None`
/// without one); ClosedError for a released snapshot.
pub fn with_snapshot<R>(
    snapshot: Option<&Bound<'_, Snapshot>>,
    f: impl FnOnce(Option<&ReadOptions>) -> PyResult<R>,
) -> PyResult<R> {
    match snapshot {
        None => f(None),
        Some(s) => s.get().with(|read| f(Some(read))),
    }
}
