//! `weft.open`'s keyword options: the engine's `Options`, one keyword each,
//! typed (PyO3 rejects an unknown keyword or a wrong type with a
//! `TypeError` naming it), checked here for what the types cannot say
//! (a negative size, an unknown compression: `ValueError`), and by the
//! engine's own validation (`InvalidArgumentError`, also a `ValueError`).

use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::codec::{Codec, Codecs};

/// The codecs of `codec=` (both sides), `key_codec=` and `value_codec=`
/// (each overriding `codec=`); bytes where none is given.
pub fn codecs(
    codec: Option<&str>,
    key_codec: Option<&str>,
    value_codec: Option<&str>,
) -> PyResult<Codecs> {
    let both = codec.map(|c| Codec::parse(c, "codec")).transpose()?;
    let side = |name: Option<&str>, what| -> PyResult<Codec> {
        match name {
            Some(n) => Codec::parse(n, what),
            None => Ok(both.unwrap_or(Codec::Bytes)),
        }
    };
    Ok(Codecs {
        keys: side(key_codec, "key_codec")?,
        values: side(value_codec, "value_codec")?,
    })
}

/// A size or count option as the engine's type: ValueError when negative.
fn size<T: TryFrom<i64>>(name: &str, value: i64) -> PyResult<T> {
    T::try_from(value)
        .map_err(|_| PyValueError::new_err(format!("{name} must be >= 0, not {value}")))
}

fn compression(name: &str, value: &str) -> PyResult<weft::Compression> {
    weft::Compression::parse(value).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{name} must be 'none', 'lz4', 'zstd' or 'zstd:LEVEL', not {value:?}"
        ))
    })
}

/// The engine options `weft.open` was given; `None` leaves the default.
pub struct OpenOptions<'a> {
    pub create_if_missing: Option<bool>,
    pub error_if_exists: Option<bool>,
    pub memtable: Option<&'a str>,
    pub write_buffer_size: Option<i64>,
    pub max_immutable_memtables: Option<i64>,
    pub block_size: Option<i64>,
    pub block_cache_size: Option<i64>,
    pub row_cache_size: Option<i64>,
    pub munk_cache_size: Option<i64>,
    pub mmap_reads: Option<bool>,
    pub bloom_bits_per_key: Option<i64>,
    pub compression: Option<&'a str>,
    pub unsorted_compression: Option<&'a str>,
    pub sorted_compression: Option<&'a str>,
    pub value_log_compression: Option<&'a str>,
    pub table_size: Option<i64>,
    pub unsorted_limit: Option<i64>,
    pub unsorted_slowdown_tables: Option<i64>,
    pub unsorted_stop_tables: Option<i64>,
    pub min_blob_size: Option<i64>,
    pub values_in_wal: Option<bool>,
    pub scan_merge_limit: Option<i64>,
    pub partition_size: Option<i64>,
    pub gc_garbage_ratio: Option<f64>,
    pub gc_min_garbage_bytes: Option<i64>,
    pub manual_wal_flush: Option<bool>,
    pub stats_save_interval: Option<f64>,
    pub max_value_logs: Option<i64>,
    pub background_jobs: Option<i64>,
    pub background_write_rate: Option<i64>,
}

impl OpenOptions<'_> {
    /// The engine's `Options`.
    pub fn build(&self) -> PyResult<weft::Options> {
        let mut o = weft::Options::default();
        macro_rules! set {
            ($($name:ident),* $(,)?) => {
                $( if let Some(v) = self.$name { o.$name = v; } )*
            };
        }
        macro_rules! set_size {
            ($($name:ident),* $(,)?) => {
                $( if let Some(v) = self.$name { o.$name = size(stringify!($name), v)?; } )*
            };
        }
        set!(
            create_if_missing,
            error_if_exists,
            mmap_reads,
            values_in_wal,
            manual_wal_flush
        );
        set!(gc_garbage_ratio);
        set_size!(
            write_buffer_size,
            max_immutable_memtables,
            block_size,
            block_cache_size,
            row_cache_size,
            munk_cache_size,
            bloom_bits_per_key,
            table_size,
            unsorted_limit,
            unsorted_slowdown_tables,
            unsorted_stop_tables,
            min_blob_size,
            scan_merge_limit,
            partition_size,
            gc_min_garbage_bytes,
            max_value_logs,
            background_jobs,
            background_write_rate,
        );
        if let Some(kind) = self.memtable {
            o.memtable = kind.parse().map_err(|_| {
                let names: Vec<&str> = weft::MemtableKind::ALL.iter().map(|k| k.name()).collect();
                PyValueError::new_err(format!("memtable must be one of {names:?}, not {kind:?}"))
            })?;
        }
        if let Some(c) = self.compression {
            o = o.compression(compression("compression", c)?);
        }
        if let Some(c) = self.unsorted_compression {
            o.unsorted_compression = compression("unsorted_compression", c)?;
        }
        if let Some(c) = self.sorted_compression {
            o.sorted_compression = compression("sorted_compression", c)?;
        }
        if let Some(c) = self.value_log_compression {
            o.value_log_compression = compression("value_log_compression", c)?;
        }
        if let Some(secs) = self.stats_save_interval {
            o.stats_save_interval = Duration::try_from_secs_f64(secs).map_err(|_| {
                PyValueError::new_err(format!(
                    "stats_save_interval must be a number of seconds >= 0, not {secs}"
                ))
            })?;
        }
        Ok(o)
    }
}
