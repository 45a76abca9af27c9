//! `weft.Keyspace`: the dict-like API over one keyspace. `weft.Db` is a
//! subclass (a database is its default keyspace plus the calls on the
//! whole database), so both share every method here.

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::iter::{RawIterator, ScanIterator, Yield};
use crate::snapshot::{with_snapshot, Snapshot};
use crate::store::{write_options, Store};

/// One keyspace of a database (`db.keyspace(name)`), with the same
/// dict-like API as `Db` (which is the default keyspace): `ks[k]`,
/// `ks[k] = v`, `del ks[k]`, `k in ks`, `get`, `get_many`, `put`,
/// `delete`, `delete_range`, `items`/`keys`/`values`, `iter`.
///
/// There is no `len()`: the engine keeps no count of live keys (a put
/// cannot tell whether it adds a key or replaces one without a read), so a
/// length would be a full scan hidden behind a cheap-looking call; count
/// with `sum(1 for _ in ks.keys())` where that is what is meant.
#[pyclass(frozen, subclass, module = "weft")]
pub struct Keyspace {
    pub store: Store,
}

#[pymethods]
impl Keyspace {
    /// The keyspace's name (`"default"` for a Db's own keys).
    #[getter]
    fn name(&self) -> &str {
        self.store.ks.name()
    }

    /// The key codec: 'bytes', 'str' or 'pickle'.
    #[getter]
    fn key_codec(&self) -> &'static str {
        self.store.codecs.keys.name()
    }

    /// The value codec: 'bytes', 'str' or 'pickle'.
    #[getter]
    fn value_codec(&self) -> &'static str {
        self.store.codecs.values.name()
    }

    /// The value of `key`, or `default` when absent; at `snapshot` when
    /// given.
    #[pyo3(signature = (key, default = None, *, snapshot = None))]
    fn get<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        with_snapshot(snapshot, |read| Ok(self.store.get(key, read)?.or(default)))
    }

    /// `get` holding the GIL throughout: only for `bench/python/gil_line.py`,
    /// which measures what releasing it costs a single get.
    fn _get_holding_gil<'py>(
        &self,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.store.get_holding_gil(key)
    }

    /// `db[key]`: the value, or KeyError. A list of keys reads them all at
    /// one sequence and returns a list with None where a key is absent
    /// (as `get_many`).
    fn __getitem__<'py>(&self, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if key.is_instance_of::<PyList>() {
            return Ok(self.store.get_many(key.py(), key, None)?.into_any());
        }
        match self.store.get(key, None)? {
            Some(v) => Ok(v),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    /// `db[key] = value`: `put` with default write options.
    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.store.put(key, value, write_options(false, false))
    }

    /// `del db[key]`: deletes it. No KeyError for an absent key: telling
    /// would cost a read before every delete.
    fn __delitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.store.delete(key, write_options(false, false))
    }

    /// `key in db`.
    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.store.lookup(key, None)?.is_some())
    }

    /// `iter(db)`: the keys, as `keys()`.
    fn __iter__(&self, py: Python<'_>) -> PyResult<ScanIterator> {
        self.scan(py, None, None, None, false, None, Yield::Keys)
    }

    /// The values of `keys` (any iterable), in order, None where absent,
    /// read at one sequence (at `snapshot` when given), GIL released.
    #[pyo3(signature = (keys, *, snapshot = None))]
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Bound<'py, PyList>> {
        with_snapshot(snapshot, |read| self.store.get_many(py, keys, read))
    }

    /// Sets `key` to `value`. `sync=True` returns once the write is on
    /// stable storage; `disable_wal=True` skips the log (lost in a crash
    /// before the next flush).
    #[pyo3(signature = (key, value, *, sync = false, disable_wal = false))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
        disable_wal: bool,
    ) -> PyResult<()> {
        self.store.put(key, value, write_options(sync, disable_wal))
    }

    /// Deletes `key` (a no-op when absent).
    #[pyo3(signature = (key, *, sync = false, disable_wal = false))]
    fn delete(&self, key: &Bound<'_, PyAny>, sync: bool, disable_wal: bool) -> PyResult<()> {
        self.store.delete(key, write_options(sync, disable_wal))
    }

    /// Deletes every key in `[start, stop)` with one write, however many
    /// keys it holds. `start > stop` is InvalidArgumentError.
    #[pyo3(signature = (start, stop, *, sync = false, disable_wal = false))]
    fn delete_range(
        &self,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        sync: bool,
        disable_wal: bool,
    ) -> PyResult<()> {
        self.store
            .delete_range(start, stop, write_options(sync, disable_wal))
    }

    /// `(key, value)` pairs in key order (descending with `reverse=True`),
    /// from `start` (inclusive) to `stop` (exclusive), only keys starting
    /// with `prefix` when given, at `snapshot` when given. The iterator
    /// reads one point in time however long it runs (an atomic scan).
    #[pyo3(signature = (*, start = None, stop = None, prefix = None, reverse = false, snapshot = None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<ScanIterator> {
        self.scan(py, start, stop, prefix, reverse, snapshot, Yield::Items)
    }

    /// Keys, as `items`.
    #[pyo3(signature = (*, start = None, stop = None, prefix = None, reverse = false, snapshot = None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<ScanIterator> {
        self.scan(py, start, stop, prefix, reverse, snapshot, Yield::Keys)
    }

    /// Values, as `items`.
    #[pyo3(signature = (*, start = None, stop = None, prefix = None, reverse = false, snapshot = None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<ScanIterator> {
        self.scan(py, start, stop, prefix, reverse, snapshot, Yield::Values)
    }

    /// A raw, positioned iterator (`seek`, `seek_for_prev`, `next`, `prev`,
    /// `valid`, `key`, `value`) over `[start, stop)` / `prefix`, at
    /// `snapshot` when given. It starts unpositioned.
    #[pyo3(signature = (*, start = None, stop = None, prefix = None, snapshot = None))]
    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<RawIterator> {
        with_snapshot(snapshot, |read| {
            let opts = self.store.bounds(start, stop, prefix, read)?;
            let cursor = self.store.cursor(py, &opts)?;
            Ok(RawIterator::new(cursor, self.store.codecs))
        })
    }

    fn __repr__(&self) -> String {
        format!("<weft.Keyspace {:?}>", self.store.ks.name())
    }
}

impl Keyspace {
    #[allow(clippy::too_many_arguments)] // the Python signature's arguments
    fn scan(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, Snapshot>>,
        what: Yield,
    ) -> PyResult<ScanIterator> {
        with_snapshot(snapshot, |read| {
            let opts = self.store.bounds(start, stop, prefix, read)?;
            let cursor = self.store.cursor(py, &opts)?;
            Ok(ScanIterator::new(cursor, self.store.codecs, what, reverse))
        })
    }
}
