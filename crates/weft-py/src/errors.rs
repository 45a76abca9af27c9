//! The engine's errors as Python exceptions: one class per
//! [`weft::Error`] variant, all under `weft.Error`, each carrying the
//! variant's fields as attributes (`CorruptionError.file`, `.offset`, ...).
//!
//! The classes are made with Python's `type(name, bases, dict)` rather than
//! PyO3's `create_exception!`, which takes one base: `InvalidArgumentError`
//! is also a `ValueError` and `IoError` an `OSError`, so code that catches
//! the built-in classes keeps working.

use pyo3::exceptions::{PyException, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// The exception classes, made once per process.
pub struct ErrorTypes {
    pub error: Py<PyType>,
    pub io: Py<PyType>,
    pub corruption: Py<PyType>,
    pub invalid_argument: Py<PyType>,
    pub poisoned: Py<PyType>,
    pub locked: Py<PyType>,
    pub unsupported: Py<PyType>,
    pub changes_released: Py<PyType>,
    pub closed: Py<PyType>,
    pub read_only: Py<PyType>,
    pub conflict: Py<PyType>,
}

static TYPES: PyOnceLock<ErrorTypes> = PyOnceLock::new();

/// The classes, made at first use (the module's import).
pub fn types(py: Python<'_>) -> PyResult<&'static ErrorTypes> {
    TYPES.get_or_try_init(py, || build(py))
}

fn make(
    py: Python<'_>,
    name: &str,
    bases: &[&Bound<'_, PyType>],
    doc: &str,
) -> PyResult<Py<PyType>> {
    let dict = PyDict::new(py);
    dict.set_item("__module__", "weft")?;
    dict.set_item("__doc__", doc)?;
    let bases = PyTuple::new(py, bases)?;
    let class = py.get_type::<PyType>().call1((name, bases, dict))?;
    Ok(class.cast_into::<PyType>()?.unbind())
}

fn build(py: Python<'_>) -> PyResult<ErrorTypes> {
    let error = make(
        py,
        "Error",
        &[&py.get_type::<PyException>()],
        "Base class of every error the engine reports (weft::Error in Rust).",
    )?;
    let base = error.bind(py);
    let sub = |name: &str, doc: &str| make(py, name, &[base], doc);
    Ok(ErrorTypes {
        io: make(
            py,
            "IoError",
            &[base, &py.get_type::<PyOSError>()],
            "An operating-system I/O call failed. `errno` and `strerror` are set when \
             the OS gave an error number; `context` names the operation and file.",
        )?,
        corruption: sub(
            "CorruptionError",
            "Bytes on disk failed verification. `file` (str) is the file holding the \
             bad bytes, `offset` (int) the byte offset of the bad region, `reason` \
             what check failed. Weft never returns data from a corrupted region.",
        )?,
        invalid_argument: make(
            py,
            "InvalidArgumentError",
            &[base, &py.get_type::<PyValueError>()],
            "The call passed something Weft does not accept (an oversized key or \
             value, an option out of range, ...). Nothing was written. Also a \
             ValueError.",
        )?,
        poisoned: sub(
            "PoisonedError",
            "An earlier WAL, manifest or flush write failed: the database accepts no \
             more writes (reads keep working). Reopen it to recover.",
        )?,
        locked: sub(
            "LockedError",
            "Another process, or another open database in this one, holds the \
             directory. `path` is the LOCK file.",
        )?,
        unsupported: sub(
            "UnsupportedError",
            "The directory was written in a newer store format than this build reads. \
             `path`, `found` and `supported` say which.",
        )?,
        changes_released: sub(
            "ChangesReleasedError",
            "The change feed no longer holds the sequence asked for. `requested` and \
             `oldest` say which.",
        )?,
        closed: sub(
            "ClosedError",
            "The database (or the snapshot used) was closed: no further operations.",
        )?,
        read_only: sub(
            "ReadOnlyError",
            "The database was opened with read_only=True: `operation` was refused and \
             nothing changed.",
        )?,
        conflict: sub(
            "ConflictError",
            "A transaction's commit found that `key` (bytes, within its keyspace) of \
             keyspace `keyspace` (str) was written after the transaction's snapshot: \
             nothing was committed; run the transaction again (Db.transact does).",
        )?,
        error,
    })
}

/// Adds the classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let t = types(py)?;
    for class in [
        &t.error,
        &t.io,
        &t.corruption,
        &t.invalid_argument,
        &t.poisoned,
        &t.locked,
        &t.unsupported,
        &t.changes_released,
        &t.closed,
        &t.read_only,
        &t.conflict,
    ] {
        let class = class.bind(py);
        m.add(class.name()?, class)?;
    }
    Ok(())
}

/// Builds the Python exception for `e`: the variant's class, its message,
/// its fields as attributes.
pub fn to_pyerr(py: Python<'_>, e: weft::Error) -> PyErr {
    match build_exception(py, &e) {
        Ok(exception) => PyErr::from_value(exception),
        // Making the exception itself failed (out of memory): report that.
        Err(failed) => failed,
    }
}

fn build_exception<'py>(py: Python<'py>, e: &weft::Error) -> PyResult<Bound<'py, PyAny>> {
    let t = types(py)?;
    let message = e.to_string();
    let plain = |class: &Py<PyType>| class.bind(py).call1((message.as_str(),));
    let exception = match e {
        weft::Error::Io { context, source } => {
            let exception = match source.raw_os_error() {
                // OSError(errno, strerror) sets `errno` and `strerror`.
                Some(errno) => t.io.bind(py).call1((errno, message.as_str()))?,
                None => plain(&t.io)?,
            };
            exception.setattr("context", context)?;
            exception
        }
        weft::Error::Corruption {
            file,
            offset,
            reason,
        } => {
            let exception = plain(&t.corruption)?;
            exception.setattr("file", file.to_string_lossy())?;
            exception.setattr("offset", offset)?;
            exception.setattr("reason", reason)?;
            exception
        }
        weft::Error::InvalidArgument(_) => plain(&t.invalid_argument)?,
        weft::Error::Poisoned(_) => plain(&t.poisoned)?,
        weft::Error::Locked { path } => {
            let exception = plain(&t.locked)?;
            exception.setattr("path", path.to_string_lossy())?;
            exception
        }
        weft::Error::Unsupported {
            path,
            found,
            supported,
        } => {
            let exception = plain(&t.unsupported)?;
            exception.setattr("path", path.to_string_lossy())?;
            exception.setattr("found", found)?;
            exception.setattr("supported", supported)?;
            exception
        }
        weft::Error::ChangesReleased { requested, oldest } => {
            let exception = plain(&t.changes_released)?;
            exception.setattr("requested", requested)?;
            exception.setattr("oldest", oldest)?;
            exception
        }
        weft::Error::Closed => plain(&t.closed)?,
        weft::Error::ReadOnly { operation } => {
            let exception = plain(&t.read_only)?;
            exception.setattr("operation", operation)?;
            exception
        }
        weft::Error::Conflict { key, keyspace } => {
            let exception = plain(&t.conflict)?;
            exception.setattr("key", pyo3::types::PyBytes::new(py, key))?;
            exception.setattr("keyspace", keyspace)?;
            exception
        }
        // `weft::Error` is non-exhaustive: a variant added later is still
        // a `weft.Error` with its message.
        _ => plain(&t.error)?,
    };
    Ok(exception)
}

/// `weft.InvalidArgumentError(message)`: the binding's own refusals of
/// what the engine would refuse too (a finished transaction, an iterator
/// read off its end).
pub fn invalid_argument(message: impl Into<String>) -> PyErr {
    Python::attach(|py| to_pyerr(py, weft::Error::InvalidArgument(message.into())))
}

/// `weft.ClosedError(message)`.
pub fn closed(message: &str) -> PyErr {
    Python::attach(|py| match types(py) {
        Ok(t) => match t.closed.bind(py).call1((message,)) {
            Ok(exception) => PyErr::from_value(exception),
            Err(e) => e,
        },
        Err(e) => e,
    })
}

/// The error for an object another thread is using inside a call that
/// released the GIL (an iterator, a transaction): `RuntimeError`, as
/// Python raises for a generator already executing.
pub fn busy(what: &str) -> PyErr {
    PyRuntimeError::new_err(format!("{what} is in use by another thread"))
}

/// `weft::Result` into `PyResult`, the error as its Python class.
pub trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for weft::Result<T> {
    fn py(self) -> PyResult<T> {
        // Attaching when already attached (every caller here is) only
        // checks a thread-local count; this runs on errors only.
        self.map_err(|e| Python::attach(|py| to_pyerr(py, e)))
    }
}
