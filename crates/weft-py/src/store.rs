//! What every reading and writing class shares: a keyspace of a database
//! with its codecs, and the calls into the engine with the GIL policy
//! (docs/DESIGN.md, "The Python binding").

use std::borrow::Cow;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use weft::{ReadOptions, WriteBatch, WriteOptions};

use crate::codec::{Codec, Codecs};
use crate::errors::IntoPyResult;

/// Whether a single `get` releases the GIL. It does: measured in
/// `bench/python/gil_line.py`, releasing and taking back an uncontended GIL
/// costs about a tenth of the Python call around a get of a value in a
/// memtable, and a get may read a table block or a value log from disk,
/// where holding the GIL would stop every other Python thread
/// (docs/DESIGN.md, "The Python binding").
pub const GET_RELEASES_GIL: bool = true;

/// One keyspace of an open database and how its keys and values convert.
#[derive(Clone)]
pub struct Store {
    pub db: weft::Db,
    pub ks: weft::Keyspace,
    pub codecs: Codecs,
}

/// The write options of a call's `sync=` and `disable_wal=`.
pub fn write_options(sync: bool, disable_wal: bool) -> WriteOptions {
    WriteOptions::new().sync(sync).disable_wal(disable_wal)
}

impl Store {
    /// True for the default keyspace (the `Db`'s own keys).
    pub fn is_default(&self) -> bool {
        self.ks.name() == weft::DEFAULT_KEYSPACE
    }

    pub fn encode_key<'a>(&self, key: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
        self.codecs.keys.encode(key, "key")
    }

    pub fn encode_value<'a>(&self, value: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
        self.codecs.values.encode(value, "value")
    }

    /// The value of `key` (at `read`'s snapshot when given), decoded.
    pub fn get<'py>(
        &self,
        key: &Bound<'py, PyAny>,
        read: Option<&ReadOptions>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let found = self.lookup(key, read)?;
        found
            .map(|v| self.codecs.values.decode(key.py(), &v))
            .transpose()
    }

    /// The stored bytes of `key`'s value (`in` needs no decoding).
    pub fn lookup(
        &self,
        key: &Bound<'_, PyAny>,
        read: Option<&ReadOptions>,
    ) -> PyResult<Option<Vec<u8>>> {
        let py = key.py();
        let k = self.encode_key(key)?;
        let k: &[u8] = &k;
        let lookup = || match read {
            Some(read) => self.ks.get_opt(k, read),
            None => self.ks.get(k),
        };
        if GET_RELEASES_GIL {
            py.detach(lookup)
        } else {
            lookup()
        }
        .py()
    }

    /// `get` without releasing the GIL, for `bench/python/gil_line.py`'s
    /// measurement of where the line is.
    pub fn get_holding_gil<'py>(
        &self,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let k = self.encode_key(key)?;
        let found = self.ks.get(&*k).py()?;
        found
            .map(|v| self.codecs.values.decode(key.py(), &v))
            .transpose()
    }

    /// The values of `keys` (any iterable), in order, `None` where absent,
    /// all read at one sequence with the GIL released.
    pub fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        read: Option<&ReadOptions>,
    ) -> PyResult<Bound<'py, PyList>> {
        let objects: Vec<Bound<'py, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
        let encoded: Vec<Cow<'_, [u8]>> = objects
            .iter()
            .map(|k| self.encode_key(k))
            .collect::<PyResult<_>>()?;
        let slices: Vec<&[u8]> = encoded.iter().map(|k| &**k).collect();
        let found: Vec<weft::Result<Option<Vec<u8>>>> = py.detach(|| match read {
            // One sequence for all: the snapshot's.
            Some(read) if !self.is_default() => {
                slices.iter().map(|k| self.ks.get_opt(k, read)).collect()
            }
            Some(read) => self.db.multi_get_opt(&slices, read),
            None => self.ks.multi_get(&slices),
        });
        let out = PyList::empty(py);
        for value in found {
            match value.py()? {
                Some(v) => out.append(self.codecs.values.decode(py, &v)?)?,
                None => out.append(py.None())?,
            }
        }
        Ok(out)
    }

    pub fn put(
        &self,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        opts: WriteOptions,
    ) -> PyResult<()> {
        let py = key.py();
        let k = self.encode_key(key)?;
        let v = self.encode_value(value)?;
        let (k, v): (&[u8], &[u8]) = (&k, &v);
        py.detach(|| {
            if !opts.sync && !opts.disable_wal {
                self.ks.put(k, v)
            } else if self.is_default() {
                self.db.put_opt(k, v, &opts)
            } else {
                let mut batch = WriteBatch::new();
                batch.put_in(&self.ks, k, v);
                self.db.write(batch, &opts)
            }
        })
        .py()
    }

    pub fn delete(&self, key: &Bound<'_, PyAny>, opts: WriteOptions) -> PyResult<()> {
        let py = key.py();
        let k = self.encode_key(key)?;
        let k: &[u8] = &k;
        py.detach(|| {
            if !opts.sync && !opts.disable_wal {
                self.ks.delete(k)
            } else if self.is_default() {
                self.db.delete_opt(k, &opts)
            } else {
                let mut batch = WriteBatch::new();
                batch.delete_in(&self.ks, k);
                self.db.write(batch, &opts)
            }
        })
        .py()
    }

    pub fn delete_range(
        &self,
        start: &Bound<'_, PyAny>,
        stop: &Bound<'_, PyAny>,
        opts: WriteOptions,
    ) -> PyResult<()> {
        let py = start.py();
        if self.codecs.keys == Codec::Pickle {
            return Err(crate::errors::invalid_argument(
                "delete_range needs key_codec 'bytes' or 'str': pickled keys do not sort \
                 as the objects they encode",
            ));
        }
        let s = self.encode_key(start)?;
        let e = self.encode_key(stop)?;
        let (s, e): (&[u8], &[u8]) = (&s, &e);
        py.detach(|| {
            if !opts.sync && !opts.disable_wal {
                self.ks.delete_range(s, e)
            } else {
                let mut batch = WriteBatch::new();
                batch.delete_range_in(&self.ks, s, e);
                self.db.write(batch, &opts)
            }
        })
        .py()
    }

    /// Read options bounded by `start` (inclusive), `stop` (exclusive) and
    /// `prefix` together, at `snapshot`'s sequence when given.
    pub fn bounds(
        &self,
        start: Option<&Bound<'_, PyAny>>,
        stop: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&ReadOptions>,
    ) -> PyResult<ReadOptions> {
        let mut opts = match snapshot {
            Some(s) => s.clone(),
            None => ReadOptions::new(),
        };
        if let Some(p) = prefix {
            if self.codecs.keys == Codec::Pickle {
                return Err(PyValueError::new_err(
                    "prefix= needs key_codec 'bytes' or 'str': pickled keys do not share \
                     the prefixes of the objects they encode",
                ));
            }
            let p = self.encode_key(p)?;
            opts.lower_bound = Some(p.to_vec());
            opts.upper_bound = weft::prefix_successor(&p);
        }
        if let Some(s) = start {
            let s = self.encode_key(s)?.into_owned();
            if opts.lower_bound.as_ref().is_none_or(|l| s > *l) {
                opts.lower_bound = Some(s);
            }
        }
        if let Some(e) = stop {
            let e = self.encode_key(e)?.into_owned();
            if opts.upper_bound.as_ref().is_none_or(|u| e < *u) {
                opts.upper_bound = Some(e);
            }
        }
        Ok(opts)
    }

    /// A cursor over this keyspace under `opts` (made with the GIL
    /// released: it pins the current state).
    pub fn cursor(&self, py: Python<'_>, opts: &ReadOptions) -> PyResult<weft::DbIterator> {
        py.detach(|| self.ks.iter(opts)).py()
    }
}
