//! The cursors Python sees: [`ScanIterator`] (what `items()`, `keys()` and
//! `values()` return: a Python iterator) and [`RawIterator`] (positioned,
//! as RocksDB's, rocksdict's and plyvel's raw iterators).
//!
//! Both wrap one `weft::DbIterator`, which pins the memtables and tables of
//! the moment it was made and reads at one sequence for its whole life: a
//! scan is atomic however long the Python loop over it runs, and the files
//! it reads stay until the iterator is dropped (or garbage collected).
//!
//! A `ScanIterator` steps the cursor in batches with the GIL released,
//! copying the entries into one buffer, and hands them out one per
//! `__next__` with the GIL held: a scan's engine work runs beside other
//! Python threads, and the release is paid once per batch, not per entry.
//! The first batch is small (a loop that stops early pays little) and each
//! next one doubles, up to `MAX_BATCH` entries or `MAX_BATCH_BYTES`.

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use weft::DbIterator;

use crate::codec::Codecs;
use crate::errors::{invalid_argument, IntoPyResult};

const FIRST_BATCH: usize = 16;
const MAX_BATCH: usize = 1024;
const MAX_BATCH_BYTES: usize = 1 << 20;

/// What a scan yields.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Yield {
    Items,
    Keys,
    Values,
}

/// An iterator over a key range at one snapshot, returned by `items()`,
/// `keys()` and `values()`; yields `(key, value)` tuples, keys or values.
/// It holds the state it reads until exhausted or dropped.
#[pyclass(module = "weft")]
pub struct ScanIterator {
    /// Only ever reached through `&mut self` (`get_mut`, no locking): the
    /// mutex makes the class `Sync`, which PyO3 asks of every class.
    cursor: Mutex<DbIterator>,
    codecs: Codecs,
    what: Yield,
    reverse: bool,
    started: bool,
    /// The cursor is past its last entry (or failed): nothing to fetch.
    exhausted: bool,
    /// The current batch: keys and values back to back...
    buf: Vec<u8>,
    /// ...entry `i` ending its key at `ends[i].0` and its value at
    /// `ends[i].1` (its key starts where entry `i - 1`'s value ends).
    ends: Vec<(usize, usize)>,
    /// The next entry of the batch to hand out.
    next: usize,
    /// Entries to fetch in the next batch.
    batch: usize,
}

impl ScanIterator {
    pub fn new(cursor: DbIterator, codecs: Codecs, what: Yield, reverse: bool) -> Self {
        ScanIterator {
            cursor: Mutex::new(cursor),
            codecs,
            what,
            reverse,
            started: false,
            exhausted: false,
            buf: Vec::new(),
            ends: Vec::new(),
            next: 0,
            batch: FIRST_BATCH,
        }
    }

    /// Fetches the next batch with the GIL released.
    fn fill(&mut self, py: Python<'_>) -> PyResult<()> {
        let ScanIterator {
            cursor,
            what,
            reverse,
            started,
            buf,
            ends,
            batch,
            ..
        } = self;
        buf.clear();
        ends.clear();
        self.next = 0;
        let want = *batch;
        *batch = (*batch * 2).min(MAX_BATCH);
        let cursor = cursor.get_mut();
        let (what, reverse) = (*what, *reverse);
        let fetched = py.detach(|| fetch(cursor, started, reverse, what, want, buf, ends));
        match fetched {
            Ok(exhausted) => {
                self.exhausted = exhausted;
                Ok(())
            }
            Err(e) => {
                self.exhausted = true;
                Err(e).py()
            }
        }
    }
}

/// Steps `cursor` over up to `want` entries into `buf`/`ends`; true when
/// it ran off its range.
fn fetch(
    cursor: &mut DbIterator,
    started: &mut bool,
    reverse: bool,
    what: Yield,
    want: usize,
    buf: &mut Vec<u8>,
    ends: &mut Vec<(usize, usize)>,
) -> weft::Result<bool> {
    if !*started {
        *started = true;
        if reverse {
            cursor.seek_to_last()?;
        } else {
            cursor.seek_to_first()?;
        }
    }
    while ends.len() < want && buf.len() < MAX_BATCH_BYTES {
        if !cursor.valid() {
            return Ok(true);
        }
        if what != Yield::Values {
            buf.extend_from_slice(cursor.key());
        }
        let key_end = buf.len();
        if what != Yield::Keys {
            buf.extend_from_slice(cursor.value());
        }
        ends.push((key_end, buf.len()));
        if reverse {
            cursor.prev()?;
        } else {
            cursor.next()?;
        }
    }
    Ok(!cursor.valid())
}

#[pymethods]
impl ScanIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.next == self.ends.len() {
            if self.exhausted {
                return Ok(None);
            }
            self.fill(py)?;
            if self.ends.is_empty() {
                return Ok(None);
            }
        }
        let i = self.next;
        self.next += 1;
        let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
        let (key_end, value_end) = self.ends[i];
        let key = &self.buf[start..key_end];
        let value = &self.buf[key_end..value_end];
        Ok(Some(match self.what {
            Yield::Items => PyTuple::new(
                py,
                [
                    self.codecs.keys.decode(py, key)?,
                    self.codecs.values.decode(py, value)?,
                ],
            )?
            .into_any(),
            Yield::Keys => self.codecs.keys.decode(py, key)?,
            Yield::Values => self.codecs.values.decode(py, value)?,
        }))
    }
}

/// A positioned cursor at one snapshot (`db.iter()`): `seek`,
/// `seek_for_prev`, `seek_to_first`, `seek_to_last`, `next`, `prev`,
/// `valid`, `key`, `value`. Starts unpositioned (`valid()` is False).
/// Every positioning call releases the GIL.
#[pyclass(module = "weft")]
pub struct RawIterator {
    /// As `ScanIterator::cursor`: reached through `&mut self` only.
    cursor: Mutex<DbIterator>,
    codecs: Codecs,
}

impl RawIterator {
    pub fn new(cursor: DbIterator, codecs: Codecs) -> Self {
        RawIterator {
            cursor: Mutex::new(cursor),
            codecs,
        }
    }

    fn step(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut DbIterator) -> weft::Result<()> + Send,
    ) -> PyResult<()> {
        let cursor = self.cursor.get_mut();
        py.detach(|| f(cursor)).py()
    }

    fn positioned(&mut self) -> PyResult<&DbIterator> {
        let cursor = self.cursor.get_mut();
        if !cursor.valid() {
            return Err(invalid_argument(
                "the iterator is not positioned on an entry (valid() is False)",
            ));
        }
        Ok(cursor)
    }
}

#[pymethods]
impl RawIterator {
    /// True when positioned on an entry.
    fn valid(&mut self) -> bool {
        self.cursor.get_mut().valid()
    }

    /// Positions on the first entry in range.
    fn seek_to_first(&mut self, py: Python<'_>) -> PyResult<()> {
        self.step(py, |c| c.seek_to_first())
    }

    /// Positions on the last entry in range.
    fn seek_to_last(&mut self, py: Python<'_>) -> PyResult<()> {
        self.step(py, |c| c.seek_to_last())
    }

    /// Positions on the first entry with a key at or after `key`.
    fn seek(&mut self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = self.codecs.keys.encode(key, "key")?.into_owned();
        self.step(key.py(), move |c| c.seek(&k))
    }

    /// Positions on the last entry with a key at or before `key`.
    fn seek_for_prev(&mut self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = self.codecs.keys.encode(key, "key")?.into_owned();
        self.step(key.py(), move |c| c.seek_for_prev(&k))
    }

    /// Moves to the next entry (invalid past the last).
    fn next(&mut self, py: Python<'_>) -> PyResult<()> {
        self.positioned()?;
        self.step(py, |c| c.next())
    }

    /// Moves to the previous entry (invalid before the first).
    fn prev(&mut self, py: Python<'_>) -> PyResult<()> {
        self.positioned()?;
        self.step(py, |c| c.prev())
    }

    /// The current key; InvalidArgumentError when not positioned.
    fn key<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let codecs = self.codecs;
        codecs.keys.decode(py, self.positioned()?.key())
    }

    /// The current value; InvalidArgumentError when not positioned.
    fn value<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let codecs = self.codecs;
        codecs.values.decode(py, self.positioned()?.value())
    }

    /// The current `(key, value)`; InvalidArgumentError when not positioned.
    fn item<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let codecs = self.codecs;
        let cursor = self.positioned()?;
        PyTuple::new(
            py,
            [
                codecs.keys.decode(py, cursor.key())?,
                codecs.values.decode(py, cursor.value())?,
            ],
        )
    }
}
