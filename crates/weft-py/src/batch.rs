//! `weft.WriteBatch`: writes applied atomically by `db.write(batch)`, or
//! on leaving `with db.batch() as b:`.

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyType;
use weft::WriteOptions;

use crate::codec::{Codec, Codecs};
use crate::errors::{invalid_argument, IntoPyResult};
use crate::keyspace::Keyspace;

/// Puts, deletes and range deletes applied atomically: after any crash,
/// all of them or none. Made by `db.batch(sync=...)` (bound to the
/// database: `with db.batch() as b:` writes it when the block ends without
/// an exception) or by `weft.WriteBatch(codec=...)` (written with
/// `db.write(batch)`). Writes may name a `keyspace=`: one batch may span
/// keyspaces. `db.write` takes the batch's contents: it is empty after.
#[pyclass(frozen, module = "weft")]
pub struct WriteBatch {
    /// Locked only briefly, never across a call that releases the GIL.
    inner: Mutex<weft::WriteBatch>,
    codecs: Codecs,
    /// Where `__exit__` writes it: set by `db.batch()`.
    bound: Option<(weft::Db, WriteOptions)>,
}

impl WriteBatch {
    pub fn bound(codecs: Codecs, db: weft::Db, opts: WriteOptions) -> Self {
        WriteBatch {
            inner: Mutex::new(weft::WriteBatch::new()),
            codecs,
            bound: Some((db, opts)),
        }
    }

    /// The contents, leaving the batch empty.
    pub fn take(&self) -> weft::WriteBatch {
        std::mem::take(&mut *self.inner.lock())
    }

    /// The keyspace a write names (`None`: the default one) and its codecs.
    fn target<'a>(
        &'a self,
        keyspace: Option<&'a Bound<'_, Keyspace>>,
    ) -> (Option<&'a weft::Keyspace>, Codecs) {
        match keyspace {
            Some(ks) => {
                let store = &ks.get().store;
                (Some(&store.ks), store.codecs)
            }
            None => (None, self.codecs),
        }
    }
}

#[pymethods]
impl WriteBatch {
    /// An empty batch with its own codecs (as `weft.open` takes them), for
    /// `db.write(batch)`.
    #[new]
    #[pyo3(signature = (*, codec = None, key_codec = None, value_codec = None))]
    fn new(
        codec: Option<&str>,
        key_codec: Option<&str>,
        value_codec: Option<&str>,
    ) -> PyResult<Self> {
        Ok(WriteBatch {
            inner: Mutex::new(weft::WriteBatch::new()),
            codecs: crate::options::codecs(codec, key_codec, value_codec)?,
            bound: None,
        })
    }

    /// Adds a put of `key` to `value` (in `keyspace` when given).
    #[pyo3(signature = (key, value, *, keyspace = None))]
    fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (ks, codecs) = self.target(keyspace);
        let k = codecs.keys.encode(key, "key")?;
        let v = codecs.values.encode(value, "value")?;
        let mut inner = self.inner.lock();
        match ks {
            Some(ks) => inner.put_in(ks, &*k, &*v),
            None => inner.put(&*k, &*v),
        };
        Ok(())
    }

    /// Adds a delete of `key` (in `keyspace` when given).
    #[pyo3(signature = (key, *, keyspace = None))]
    fn delete(
        &self,
        key: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (ks, codecs) = self.target(keyspace);
        let k = codecs.keys.encode(key, "key")?;
        let mut inner = self.inner.lock();
        match ks {
            Some(ks) => inner.delete_in(ks, &*k),
            None => inner.delete(&*k),
        };
        Ok(())
    }

    /// Adds a delete of every key in `[start, stop)` (in `keyspace` when
    /// given).
    #[pyo3(signature = (start, stop, *, keyspace = None))]
    fn delete_range(
        &self,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        keyspace: Option<&Bound<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (ks, codecs) = self.target(keyspace);
        if codecs.keys == Codec::Pickle {
            return Err(invalid_argument(
                "delete_range needs key_codec 'bytes' or 'str': pickled keys do not sort \
                 as the objects they encode",
            ));
        }
        let s = codecs.keys.encode(start, "start")?;
        let e = codecs.keys.encode(stop, "stop")?;
        let mut inner = self.inner.lock();
        match ks {
            Some(ks) => inner.delete_range_in(ks, &*s, &*e),
            None => inner.delete_range(&*s, &*e),
        };
        Ok(())
    }

    /// Removes every write.
    fn clear(&self) {
        self.inner.lock().clear();
    }

    /// The number of writes in the batch.
    fn __len__(&self) -> usize {
        self.inner.lock().len()
    }

    /// Bytes the batch takes (its encoded size).
    #[getter]
    fn approximate_size(&self) -> usize {
        self.inner.lock().approximate_size()
    }

    fn __enter__(slf: &Bound<'_, Self>) -> PyResult<Py<Self>> {
        if slf.get().bound.is_none() {
            return Err(invalid_argument(
                "a WriteBatch made by weft.WriteBatch() has no database to commit to: \
                 use `with db.batch() as b:`, or db.write(batch)",
            ));
        }
        Ok(slf.clone().unbind())
    }

    /// Writes the batch when the block ended without an exception;
    /// discards it otherwise.
    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let batch = self.take();
        if exc_type.is_some() {
            return Ok(false);
        }
        if let Some((db, opts)) = &self.bound {
            py.detach(|| db.write(batch, opts)).py()?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<weft.WriteBatch writes={}>", self.inner.lock().len())
    }
}
