//! The `weft` Python module: Weft's engine from Python, shaped like the
//! stores Python users already know (rocksdict, plyvel, lmdb).
//!
//! ```python
//! import weft
//! with weft.open("my-db") as db:
//!     db[b"apple"] = b"red"
//!     for key, value in db.items(prefix=b"a"):
//!         ...
//! ```
//!
//! The design (the GIL policy, what iterators and snapshots hold, codecs,
//! how errors map) is docs/DESIGN.md's "The Python binding"; the API's
//! reference is the docstrings and `weft.pyi` beside this crate's
//! Cargo.toml. The crate is built by maturin (`pyproject.toml`); its tests
//! are the pytest suite in `tests/`, run by `scripts/test-python`.

use std::path::PathBuf;

use pyo3::prelude::*;

mod batch;
mod codec;
mod db;
mod errors;
mod iter;
mod keyspace;
mod options;
mod snapshot;
mod stats;
mod store;
mod transaction;

use errors::IntoPyResult;
use options::OpenOptions;
use store::Store;

/// Opens (or creates) the database in `path` and returns a `Db`.
///
/// Every option is keyword-only and typed: an unknown name or a wrong type
/// raises TypeError, a value out of range ValueError (InvalidArgumentError
/// for what the engine refuses). `read_only=True` opens beside a writer
/// (no lock, nothing written; `refresh()` catches up). `codec=` ('bytes',
/// 'str' or 'pickle'; `key_codec=`/`value_codec=` per side) sets how keys
/// and values convert: bytes by default. The other options are the
/// engine's `weft::Options`, under the same names (sizes in bytes,
/// `stats_save_interval` in seconds, compressions as 'none', 'lz4', 'zstd'
/// or 'zstd:LEVEL'; `compression=` sets all three layers).
#[pyfunction]
#[pyo3(signature = (
    path, *, read_only = false, codec = None, key_codec = None, value_codec = None,
    create_if_missing = None, error_if_exists = None, memtable = None,
    write_buffer_size = None, max_immutable_memtables = None, block_size = None,
    block_cache_size = None, row_cache_size = None, munk_cache_size = None,
    mmap_reads = None, bloom_bits_per_key = None, compression = None,
    unsorted_compression = None, sorted_compression = None,
    value_log_compression = None, table_size = None, unsorted_limit = None,
    unsorted_slowdown_tables = None, unsorted_stop_tables = None, min_blob_size = None,
    values_in_wal = None, scan_merge_limit = None, partition_size = None,
    gc_garbage_ratio = None, gc_min_garbage_bytes = None, manual_wal_flush = None,
    stats_save_interval = None, max_value_logs = None, background_jobs = None,
    background_write_rate = None,
))]
#[allow(clippy::too_many_arguments)] // one per engine option: the Python signature
fn open<'py>(
    py: Python<'py>,
    path: PathBuf,
    read_only: bool,
    codec: Option<&str>,
    key_codec: Option<&str>,
    value_codec: Option<&str>,
    create_if_missing: Option<bool>,
    error_if_exists: Option<bool>,
    memtable: Option<&str>,
    write_buffer_size: Option<i64>,
    max_immutable_memtables: Option<i64>,
    block_size: Option<i64>,
    block_cache_size: Option<i64>,
    row_cache_size: Option<i64>,
    munk_cache_size: Option<i64>,
    mmap_reads: Option<bool>,
    bloom_bits_per_key: Option<i64>,
    compression: Option<&str>,
    unsorted_compression: Option<&str>,
    sorted_compression: Option<&str>,
    value_log_compression: Option<&str>,
    table_size: Option<i64>,
    unsorted_limit: Option<i64>,
    unsorted_slowdown_tables: Option<i64>,
    unsorted_stop_tables: Option<i64>,
    min_blob_size: Option<i64>,
    values_in_wal: Option<bool>,
    scan_merge_limit: Option<i64>,
    partition_size: Option<i64>,
    gc_garbage_ratio: Option<f64>,
    gc_min_garbage_bytes: Option<i64>,
    manual_wal_flush: Option<bool>,
    stats_save_interval: Option<f64>,
    max_value_logs: Option<i64>,
    background_jobs: Option<i64>,
    background_write_rate: Option<i64>,
) -> PyResult<Bound<'py, db::Db>> {
    let codecs = options::codecs(codec, key_codec, value_codec)?;
    let options = OpenOptions {
        create_if_missing,
        error_if_exists,
        memtable,
        write_buffer_size,
        max_immutable_memtables,
        block_size,
        block_cache_size,
        row_cache_size,
        munk_cache_size,
        mmap_reads,
        bloom_bits_per_key,
        compression,
        unsorted_compression,
        sorted_compression,
        value_log_compression,
        table_size,
        unsorted_limit,
        unsorted_slowdown_tables,
        unsorted_stop_tables,
        min_blob_size,
        values_in_wal,
        scan_merge_limit,
        partition_size,
        gc_garbage_ratio,
        gc_min_garbage_bytes,
        manual_wal_flush,
        stats_save_interval,
        max_value_logs,
        background_jobs,
        background_write_rate,
    }
    .build()?;
    // Recovery may replay logs for a while: other threads run meanwhile.
    let opened = py.detach(|| {
        let db = if read_only {
            weft::Db::open_read_only(&path, options)?
        } else {
            weft::Db::open(&path, options)?
        };
        let ks = db.keyspace(weft::DEFAULT_KEYSPACE)?;
        Ok((db, ks))
    });
    let (db, ks) = opened.py()?;
    db::Db::create(py, Store { db, ks, codecs })
}

/// Weft: a persistent, ordered key-value store. `weft.open(path)` returns
/// a `Db`.
#[pymodule(name = "weft")]
fn weft_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_class::<keyspace::Keyspace>()?;
    m.add_class::<db::Db>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<batch::WriteBatch>()?;
    m.add_class::<transaction::Transaction>()?;
    m.add_class::<iter::ScanIterator>()?;
    m.add_class::<iter::RawIterator>()?;
    errors::register(m)?;
    m.add("MAX_KEY_SIZE", weft::MAX_KEY_SIZE)?;
    m.add("MAX_VALUE_SIZE", weft::MAX_VALUE_SIZE)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
