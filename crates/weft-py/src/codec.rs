//! How Python keys and values become the engine's bytes and back, chosen
//! per database at open (`key_codec=`, `value_codec=`, or `codec=` for
//! both): `bytes` as they are (the default: no conversion, and the order
//! of keys is the engine's byte order), `str` as UTF-8 (which keeps code
//! point order), or `pickle` (any picklable object, as rocksdict's default;
//! keys then sort by their pickled bytes, so ranges and prefixes of
//! pickled keys mean little and `prefix=` is refused).

use std::borrow::Cow;

use pyo3::exceptions::{PyTypeError, PyUnicodeDecodeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyString};

/// One side's codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Bytes,
    Str,
    Pickle,
}

/// A database's codecs: one for keys, one for values.
#[derive(Clone, Copy, Debug)]
pub struct Codecs {
    pub keys: Codec,
    pub values: Codec,
}

/// `pickle.dumps` and `pickle.loads`, looked up once.
static PICKLE: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

fn pickle(py: Python<'_>) -> PyResult<&'static (Py<PyAny>, Py<PyAny>)> {
    PICKLE.get_or_try_init(py, || {
        let module = py.import("pickle")?;
        Ok::<_, PyErr>((
            module.getattr("dumps")?.unbind(),
            module.getattr("loads")?.unbind(),
        ))
    })
}

impl Codec {
    /// Parses a codec name; `what` names the argument in the error.
    pub fn parse(name: &str, what: &str) -> PyResult<Codec> {
        match name {
            "bytes" => Ok(Codec::Bytes),
            "str" => Ok(Codec::Str),
            "pickle" => Ok(Codec::Pickle),
            other => Err(PyValueError::new_err(format!(
                "{what} must be 'bytes', 'str' or 'pickle', not {other:?}"
            ))),
        }
    }

    /// Its name, as `parse` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Bytes => "bytes",
            Codec::Str => "str",
            Codec::Pickle => "pickle",
        }
    }

    /// `obj` as stored bytes; `what` ("key", "value", ...) names it in a
    /// `TypeError`. Borrows a `bytes` object's buffer (no copy) and a `str`'s
    /// UTF-8 where Python keeps one.
    pub fn encode<'a>(self, obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
        match self {
            Codec::Bytes => match obj.cast::<PyBytes>() {
                Ok(b) => Ok(Cow::Borrowed(b.as_bytes())),
                Err(_) => Err(self.type_error(obj, what)),
            },
            Codec::Str => match obj.cast::<PyString>() {
                Ok(s) => Ok(match s.to_cow()? {
                    Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                    Cow::Owned(s) => Cow::Owned(s.into_bytes()),
                }),
                Err(_) => Err(self.type_error(obj, what)),
            },
            Codec::Pickle => {
                let dumped = pickle(obj.py())?.0.bind(obj.py()).call1((obj,))?;
                let bytes = dumped.cast::<PyBytes>()?;
                Ok(Cow::Owned(bytes.as_bytes().to_vec()))
            }
        }
    }

    fn type_error(self, obj: &Bound<'_, PyAny>, what: &str) -> PyErr {
        let got = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        PyTypeError::new_err(format!(
            "{what} must be {} (this database's codec is '{}'), not {got}",
            match self {
                Codec::Bytes => "bytes",
                Codec::Str => "str",
                Codec::Pickle => "picklable",
            },
            self.name()
        ))
    }

    /// Stored bytes as the Python object they encode.
    pub fn decode<'py>(self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Codec::Bytes => Ok(PyBytes::new(py, bytes).into_any()),
            Codec::Str => match std::str::from_utf8(bytes) {
                Ok(s) => Ok(PyString::new(py, s).into_any()),
                Err(e) => Err(PyUnicodeDecodeError::new_err_from_utf8(py, bytes, e)),
            },
            Codec::Pickle => pickle(py)?.1.bind(py).call1((PyBytes::new(py, bytes),)),
        }
    }
}
