//! The engines under test, behind one small trait so every workload runs
//! unchanged against Weft and the stores users would pick instead.
//!
//! The trait is the intersection of what db_bench, YCSB and the analytics
//! stream need: put, get, delete, a scan bounded by a count, and one bounded
//! by a count and an end key. Durability is fixed when the engine is opened
//! (`--sync`), as with db_bench's `WriteOptions`, so the hot path carries no
//! per-call options.
//!
//! Fairness (issue 3): every adapter gets the same memory budget, taken from
//! `--cache_size` (read cache) and `--write_buffer_size` (write buffer), the
//! same durability (a write-ahead log, no fsync per write unless `--sync`),
//! and no compression. What each peer can and cannot honour is written at its
//! adapter. Peers are cargo features (`rocksdb`, `fjall`, `redb`) because
//! they take minutes to compile; the default build has Weft only.

use std::path::Path;

use serde_json::Value;
use weft::{Db, Keyspace, Options, ReadOptions, TransactionOptions, WriteBatch, WriteOptions};

use crate::config::BenchConfig;
use crate::{Error, Result};

/// One store, opened on one directory.
pub trait Engine: Send + Sync {
    /// Sets `key` to `value`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// `key`'s value, if any.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Removes `key`.
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Removes every key in `[start, end)` with one range delete.
    fn delete_range(&self, _start: &[u8], _end: &[u8]) -> Result<()> {
        Err(Error::Engine(
            "deleterange is not supported by this engine".into(),
        ))
    }
    /// Visits up to `limit` entries in key order from the first key ≥ `start`
    /// (or the first key), or, when `reverse`, backwards from the last key ≤
    /// `start` (or the last key). Returns the entries visited.
    fn scan(
        &self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64>;
    /// Visits up to `limit` entries with keys in `[start, end)`, in key
    /// order; returns the entries visited. The analytics scans read one
    /// app's events: the end key (the next app's prefix) is handed to the
    /// engine as its iterator bound (RocksDB's `iterate_upper_bound`, a
    /// range elsewhere), as an application reading one prefix would, so a
    /// scan of a rare app stops at its last event instead of reading its
    /// neighbours' events up to `limit` and dropping them.
    fn scan_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64>;
    /// Engine-specific statistics, as JSON (printed by `stats`, stored in the
    /// JSON report). Amplification and memory figures the harness computes
    /// itself from the process and the directory.
    fn stats(&self) -> Value;
    /// A write amplification the engine measures itself (bytes it wrote /
    /// user bytes), if it does.
    fn write_amplification(&self) -> Option<f64> {
        None
    }
    /// Storage reads per point read, if the engine counts them.
    fn read_amplification(&self) -> Option<f64> {
        None
    }
    /// Bytes of memory the engine reports holding (memtables, caches).
    fn memory_bytes(&self) -> Option<u64> {
        None
    }
    /// Compacts the whole key space (db_bench's `compact`): for Weft, flush
    /// the memtables and merge every partition's UnsortedStore into its
    /// SortedStore.
    fn compact(&self) -> Result<()> {
        Err(Error::Engine(
            "compact is not supported by this engine".into(),
        ))
    }
    /// Runs `ops` in one optimistic transaction (`--transactions`): each
    /// read a `get_for_update`, each write a `put`, then a commit, the
    /// whole retried on a conflict. Returns the reads that found a value
    /// (in the run that committed) and the conflicts retried.
    fn transaction(&self, ops: &[TxnOp<'_>]) -> Result<(u64, u64)> {
        let _ = ops;
        Err(Error::Engine(
            "--transactions is not supported by this engine".into(),
        ))
    }
    /// Flushes and closes.
    fn close(self: Box<Self>) -> Result<()>;
}

/// One operation of [`Engine::transaction`].
#[derive(Debug, Clone, Copy)]
pub enum TxnOp<'a> {
    /// Read the key for update.
    Read(&'a [u8]),
    /// Set the key to the value.
    Write(&'a [u8], &'a [u8]),
}

/// `--engine` values this build knows.
pub fn available() -> Vec<&'static str> {
    let mut v = vec!["weft"];
    if cfg!(feature = "rocksdb") {
        v.push("rocksdb");
    }
    if cfg!(feature = "fjall") {
        v.push("fjall");
    }
    if cfg!(feature = "redb") {
        v.push("redb");
    }
    v
}

/// Opens `config.engine` on `config.db`.
pub fn open(config: &BenchConfig) -> Result<Box<dyn Engine>> {
    let dir = &config.db;
    match config.engine.as_str() {
        "weft" => Ok(Box::new(WeftEngine::open(dir, config)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(peers::rocks::RocksEngine::open(dir, config)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(peers::fjall::FjallEngine::open(dir, config)?)),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(peers::redb::RedbEngine::open(dir, config)?)),
        other => Err(Error::Config(format!(
            "engine {other:?} is not in this build (available: {}; build with \
             --features {other} to add it)",
            available().join(", ")
        ))),
    }
}

/// The Weft options a configuration describes: db_bench's flags mapped onto
/// [`weft::Options`], and Weft's own knobs where given.
pub fn weft_options(c: &BenchConfig) -> Options {
    let mut o = Options::default()
        .write_buffer_size(c.write_buffer_size)
        .memtable(c.memtable)
        .block_cache_size(c.cache_size)
        .compression(c.compression_type);
    if let Some(b) = c.bloom_bits {
        o = o.bloom_bits_per_key(b);
    }
    let s = &c.store;
    if let Some(v) = s.partition_size {
        o = o.partition_size(v);
    }
    if let Some(v) = s.unsorted_limit {
        o = o.unsorted_limit(v);
    }
    if let Some(v) = s.min_blob_size {
        o = o.min_blob_size(v);
    }
    if let Some(v) = s.mmap_read {
        o = o.mmap_reads(v);
    }
    if let Some(v) = s.values_in_wal {
        o = o.values_in_wal(v);
    }
    if let Some(v) = s.scan_merge_limit {
        o = o.scan_merge_limit(v);
    }
    if let Some(v) = s.gc_garbage_ratio {
        o = o.gc_garbage_ratio(v);
    }
    if let Some(v) = s.gc_min_garbage_bytes {
        o = o.gc_min_garbage_bytes(v);
    }
    if let Some(v) = s.max_value_logs {
        o = o.max_value_logs(v);
    }
    if let Some(v) = s.max_background_jobs {
        o = o.background_jobs(v);
    }
    if let Some(v) = s.rate_limiter_bytes_per_sec {
        o = o.background_write_rate(v);
    }
    if let Some(v) = s.munk_cache_size {
        o = o.munk_cache_size(v);
    }
    if let Some(v) = s.row_cache_size {
        o = o.row_cache_size(v);
    }
    if let Some(v) = s.unsorted_compression {
        o = o.unsorted_compression(v);
    }
    if let Some(v) = s.sorted_compression {
        o = o.sorted_compression(v);
    }
    if let Some(v) = s.value_log_compression {
        o = o.value_log_compression(v);
    }
    o
}

/// Weft itself.
pub struct WeftEngine {
    db: Db,
    write: WriteOptions,
    /// The commit's write options (`write`), retried without a bound that
    /// a benchmark could hit.
    transaction: TransactionOptions,
    /// `--keyspaces`: the keyspaces keys are spread over; empty for the
    /// plain API (the default keyspace).
    keyspaces: Vec<Keyspace>,
}

impl WeftEngine {
    /// Opens (creating) a Weft database at `dir`.
    pub fn open(dir: &Path, config: &BenchConfig) -> Result<Self> {
        let write = WriteOptions::new()
            .sync(config.sync)
            .disable_wal(config.disable_wal);
        let db = Db::open(dir, weft_options(config))?;
        let keyspaces = (0..config.keyspaces)
            .map(|i| db.keyspace(&format!("bench{i}")))
            .collect::<weft::Result<Vec<_>>>()?;
        Ok(WeftEngine {
            db,
            transaction: TransactionOptions::new()
                .write_options(write)
                .max_attempts(usize::MAX),
            write,
            keyspaces,
        })
    }

    /// The keyspace `key` belongs to under `--keyspaces` (by a hash of the
    /// key, so every benchmark finds a key where the fills wrote it), or
    /// `None` for the plain API.
    fn keyspace_of(&self, key: &[u8]) -> Option<&Keyspace> {
        if self.keyspaces.is_empty() {
            return None;
        }
        // FNV-1a: a few instructions per key byte, and keys that differ
        // in any byte (db_bench's are numbers in a fixed-width prefix)
        // spread evenly. A crate for it would be a dependency for 5 lines.
        let hash = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let n = self.keyspaces.len() as u64;
        self.keyspaces.get((hash % n) as usize)
    }

    /// A cursor over the keyspace of `key` (`None`: the first one), or the
    /// whole database with the plain API.
    fn iter_for(&self, key: Option<&[u8]>, opts: &ReadOptions) -> Result<weft::DbIterator> {
        let ks = match key {
            Some(k) => self.keyspace_of(k),
            None => self.keyspaces.first(),
        };
        Ok(match ks {
            Some(ks) => ks.iter(opts)?,
            None => self.db.iter(opts)?,
        })
    }
}

impl Engine for WeftEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        match self.keyspace_of(key) {
            Some(ks) => ks.put_opt(key, value, &self.write)?,
            None => self.db.put_opt(key, value, &self.write)?,
        }
        Ok(())
    }
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(match self.keyspace_of(key) {
            Some(ks) => ks.get(key)?,
            None => self.db.get(key)?,
        })
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        match self.keyspace_of(key) {
            Some(ks) => ks.delete_opt(key, &self.write)?,
            None => self.db.delete_opt(key, &self.write)?,
        }
        Ok(())
    }
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        if self.keyspaces.is_empty() {
            return Ok(self.db.delete_range_opt(start, end, &self.write)?);
        }
        // The range's keys hash to every keyspace: one batch deletes the
        // range in each, atomically.
        let mut batch = WriteBatch::new();
        for ks in &self.keyspaces {
            batch.delete_range_in(ks, start, end);
        }
        Ok(self.db.write(batch, &self.write)?)
    }
    fn transaction(&self, ops: &[TxnOp<'_>]) -> Result<(u64, u64)> {
        let mut runs = 0u64;
        let found = self.db.transact_opt(&self.transaction, |txn| {
            runs += 1;
            let mut found = 0;
            for op in ops {
                match *op {
                    TxnOp::Read(key) => {
                        let value = match self.keyspace_of(key) {
                            Some(ks) => txn.get_for_update_in(ks, key)?,
                            None => txn.get_for_update(key)?,
                        };
                        found += u64::from(value.is_some());
                    }
                    TxnOp::Write(key, value) => match self.keyspace_of(key) {
                        Some(ks) => txn.put_in(ks, key, value)?,
                        None => txn.put(key, value)?,
                    },
                }
            }
            Ok(found)
        })?;
        Ok((found, runs - 1))
    }
    fn scan(
        &self,
        start: Option<&[u8]>,
        reverse: bool,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let mut it = self.iter_for(start, &ReadOptions::new())?;
        match (start, reverse) {
            (None, false) => it.seek_to_first()?,
            (None, true) => it.seek_to_last()?,
            (Some(k), false) => it.seek(k)?,
            (Some(k), true) => it.seek_for_prev(k)?,
        }
        let mut n = 0;
        while n < limit && it.valid() {
            visit(it.key(), it.value());
            n += 1;
            if n == limit {
                // No step past the last entry wanted: `seekrandom` visits
                // the entry sought and `seek_nexts` more with `seek_nexts`
                // steps, as db_bench's loop does.
                break;
            }
            if reverse {
                it.prev()?
            } else {
                it.next()?
            }
        }
        Ok(n)
    }
    fn scan_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<u64> {
        let mut it = self.iter_for(Some(start), &ReadOptions::new().upper_bound(end.to_vec()))?;
        it.seek(start)?;
        let mut n = 0;
        while n < limit && it.valid() {
            visit(it.key(), it.value());
            n += 1;
            if n == limit {
                // As `scan`: no step past the last entry wanted.
                break;
            }
            it.next()?;
        }
        Ok(n)
    }
    fn stats(&self) -> Value {
        crate::stats_json::to_json(&self.db.stats())
    }
    fn write_amplification(&self) -> Option<f64> {
        let s = self.db.stats();
        (s.user_bytes_written > 0).then_some(s.write_amplification)
    }
    fn read_amplification(&self) -> Option<f64> {
        // Tables and logs touched per get; a memtable hit touches none.
        let r = self.db.stats().reads;
        let gets = r.memtable_hits + r.unsorted_hits + r.sorted_hits + r.misses;
        (gets > 0)
            .then(|| (r.unsorted_probes + r.sorted_probes + r.value_log_reads) as f64 / gets as f64)
    }
    fn memory_bytes(&self) -> Option<u64> {
        let s = self.db.stats();
        let index: u64 = s.partitions.iter().map(|p| p.index_bytes).sum();
        Some(s.active_memtable_bytes + s.immutable_memtable_bytes + s.block_cache.usage + index)
    }
    fn compact(&self) -> Result<()> {
        Ok(self.db.compact()?)
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.db.close()?)
    }
}

/// Peer engines, each behind its cargo feature.
#[cfg(any(feature = "rocksdb", feature = "fjall", feature = "redb"))]
mod peers {
    use super::*;
    use serde_json::json;

    fn err(e: impl std::fmt::Display) -> Error {
        Error::Engine(e.to_string())
    }

    /// RocksDB through the `rocksdb` crate: LRU block cache of `--cache_size`,
    /// `--write_buffer_size` memtables, bloom filter of `--bloom_bits`,
    /// `--compression_type` on every level, WAL on, `sync` per write only
    /// with `--sync`.
    #[cfg(feature = "rocksdb")]
    pub mod rocks {
        use super::*;
        use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, IteratorMode, Options, DB};

        pub struct RocksEngine {
            db: DB,
            write: rocksdb::WriteOptions,
        }

        impl RocksEngine {
            pub fn open(dir: &Path, c: &BenchConfig) -> Result<Self> {
                let mut o = Options::default();
                o.create_if_missing(true);
                o.set_write_buffer_size(c.write_buffer_size);
                o.set_compression_type(match c.compression_type {
                    weft::Compression::None => DBCompressionType::None,
                    weft::Compression::Lz4 => DBCompressionType::Lz4,
                    weft::Compression::Zstd(_) => DBCompressionType::Zstd,
                });
                if let weft::Compression::Zstd(level) = c.compression_type {
                    o.set_compression_options(-14, level, 0, 0);
                }
                o.increase_parallelism(2);
                let mut t = BlockBasedOptions::default();
                let cache = Cache::new_lru_cache(c.cache_size);
                t.set_block_cache(&cache);
                if let Some(b) = c.bloom_bits {
                    t.set_bloom_filter(b as f64, false);
                }
                o.set_block_based_table_factory(&t);
                let db = DB::open(&o, dir).map_err(err)?;
                let mut write = rocksdb::WriteOptions::default();
                write.set_sync(c.sync);
                write.disable_wal(c.disable_wal);
                Ok(RocksEngine { db, write })
            }
        }

        impl Engine for RocksEngine {
            fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
                self.db.put_opt(key, value, &self.write).map_err(err)
            }
            fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
                self.db.get(key).map_err(err)
            }
            fn delete(&self, key: &[u8]) -> Result<()> {
                self.db.delete_opt(key, &self.write).map_err(err)
            }
            fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
                let mut batch = rocksdb::WriteBatch::default();
                batch.delete_range(start, end);
                self.db.write_opt(batch, &self.write).map_err(err)
            }
            fn scan(
                &self,
                start: Option<&[u8]>,
                reverse: bool,
                limit: u64,
                visit: &mut dyn FnMut(&[u8], &[u8]),
            ) -> Result<u64> {
                let mode = match (start, reverse) {
                    (None, false) => IteratorMode::Start,
                    (None, true) => IteratorMode::End,
                    (Some(k), false) => IteratorMode::From(k, rocksdb::Direction::Forward),
                    (Some(k), true) => IteratorMode::From(k, rocksdb::Direction::Reverse),
                };
                let mut n = 0;
                for item in self.db.iterator(mode) {
                    if n >= limit {
                        break;
                    }
                    let (k, v) = item.map_err(err)?;
                    visit(&k, &v);
                    n += 1;
                }
                Ok(n)
            }
            fn scan_range(
                &self,
                start: &[u8],
                end: &[u8],
                limit: u64,
                visit: &mut dyn FnMut(&[u8], &[u8]),
            ) -> Result<u64> {
                // The raw iterator, as Weft's adapter walks its own: no
                // copy of each entry into boxes (the crate's `Iterator`
                // makes two per entry) and no step past the last one
                // wanted.
                let mut ro = rocksdb::ReadOptions::default();
                ro.set_iterate_upper_bound(end.to_vec());
                let mut it = self.db.raw_iterator_opt(ro);
                it.seek(start);
                let mut n = 0;
                while n < limit {
                    let Some((k, v)) = it.item() else {
                        break;
                    };
                    visit(k, v);
                    n += 1;
                    if n < limit {
                        it.next();
                    }
                }
                it.status().map_err(err)?;
                Ok(n)
            }
            fn stats(&self) -> Value {
                let p = |name: &str| self.db.property_value(name).ok().flatten();
                json!({
                    "rocksdb.stats": p("rocksdb.stats"),
                    "estimate-num-keys": p("rocksdb.estimate-num-keys"),
                })
            }
            fn memory_bytes(&self) -> Option<u64> {
                let p = |name: &str| self.db.property_int_value(name).ok().flatten();
                Some(
                    p("rocksdb.cur-size-all-mem-tables").unwrap_or(0)
                        + p("rocksdb.block-cache-usage").unwrap_or(0),
                )
            }
            fn compact(&self) -> Result<()> {
                self.db.flush().map_err(err)?;
                self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
                Ok(())
            }
            fn close(self: Box<Self>) -> Result<()> {
                self.db.flush_wal(true).map_err(err)
            }
        }
    }

    /// fjall 3 (an LSM in Rust): one keyspace (fjall 3's name for what
    /// fjall 2 called a partition), block cache of `--cache_size`, memtables
    /// of `--write_buffer_size`, bloom filter of `--bloom_bits` (fjall's
    /// default filter policy without it), journal on; `--sync` persists the
    /// journal (fsync) after each write.
    ///
    /// Compression: fjall 3 (with its default `lz4` feature) leaves data
    /// blocks of L0 and L1 uncompressed and compresses them with LZ4 from
    /// L2 on, and compresses journal entries of 4 KiB and more with LZ4.
    /// Both are set to none here, as RocksDB runs with
    /// `--compression_type=none` (index blocks are uncompressed by default).
    ///
    /// fjall 3 has no database-wide write buffer cap any more (its
    /// `max_write_buffer_size` is deprecated and ignored), so unlike the
    /// fjall 2 adapter only the per-keyspace memtable size is set.
    #[cfg(feature = "fjall")]
    pub mod fjall {
        use super::*;
        use ::fjall::config::{
            BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
        };
        use ::fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};

        pub struct FjallEngine {
            db: Database,
            ks: Keyspace,
            sync: bool,
        }

        impl FjallEngine {
            pub fn open(dir: &Path, c: &BenchConfig) -> Result<Self> {
                let db = Database::builder(dir)
                    .cache_size(c.cache_size as u64)
                    .journal_compression(CompressionType::None)
                    .open()
                    .map_err(err)?;
                let bloom_bits = c.bloom_bits;
                let memtable = c.write_buffer_size as u64;
                let ks = db
                    .keyspace("bench", || {
                        let mut opts = KeyspaceCreateOptions::default()
                            .data_block_compression_policy(CompressionPolicy::all(
                                CompressionType::None,
                            ))
                            .index_block_compression_policy(CompressionPolicy::all(
                                CompressionType::None,
                            ))
                            .max_memtable_size(memtable);
                        if let Some(b) = bloom_bits {
                            opts = opts.filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                                BloomConstructionPolicy::BitsPerKey(b as f32),
                            )));
                        }
                        opts
                    })
                    .map_err(err)?;
                Ok(FjallEngine {
                    db,
                    ks,
                    sync: c.sync,
                })
            }
            fn persist(&self) -> Result<()> {
                if self.sync {
                    self.db.persist(PersistMode::SyncData).map_err(err)?;
                }
                Ok(())
            }
        }

        impl Engine for FjallEngine {
            fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
                self.ks.insert(key, value).map_err(err)?;
                self.persist()
            }
            fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
                Ok(self.ks.get(key).map_err(err)?.map(|v| v.to_vec()))
            }
            fn delete(&self, key: &[u8]) -> Result<()> {
                self.ks.remove(key).map_err(err)?;
                self.persist()
            }
            fn scan(
                &self,
                start: Option<&[u8]>,
                reverse: bool,
                limit: u64,
                visit: &mut dyn FnMut(&[u8], &[u8]),
            ) -> Result<u64> {
                let mut n = 0;
                let mut each = |item: ::fjall::Guard| {
                    let (k, v) = item.into_inner().map_err(err)?;
                    visit(&k, &v);
                    n += 1;
                    Ok::<_, Error>(())
                };
                let lim = limit as usize;
                match (start, reverse) {
                    (None, false) => self.ks.iter().take(lim).try_for_each(&mut each)?,
                    (None, true) => self.ks.iter().rev().take(lim).try_for_each(&mut each)?,
                    (Some(k), false) => self.ks.range(k..).take(lim).try_for_each(&mut each)?,
                    (Some(k), true) => self
                        .ks
                        .range(..=k)
                        .rev()
                        .take(lim)
                        .try_for_each(&mut each)?,
                }
                Ok(n)
            }
            fn scan_range(
                &self,
                start: &[u8],
                end: &[u8],
                limit: u64,
                visit: &mut dyn FnMut(&[u8], &[u8]),
            ) -> Result<u64> {
                let mut n = 0;
                for item in self.ks.range(start..end).take(limit as usize) {
                    let (k, v) = item.into_inner().map_err(err)?;
                    visit(&k, &v);
                    n += 1;
                }
                Ok(n)
            }
            fn stats(&self) -> Value {
                json!({
                    "disk_space": self.db.disk_space().ok(),
                    "write_buffer_size": self.db.write_buffer_size(),
                    "tables": self.ks.table_count(),
                    "l0_tables": self.ks.l0_table_count(),
                })
            }
            fn memory_bytes(&self) -> Option<u64> {
                Some(self.db.write_buffer_size())
            }
            fn close(self: Box<Self>) -> Result<()> {
                self.db.persist(PersistMode::SyncAll).map_err(err)
            }
        }
    }

    /// redb 4 (a copy-on-write B-tree): one table; cache of `--cache_size` +
    /// `--write_buffer_size` (redb has no separate write buffer; redb does
    /// not compress). redb has no WAL: each write is its own transaction,
    /// committed with `Durability::None` unless `--sync` (then `Immediate`,
    /// an fsync per write). That is weaker than a WAL for non-sync runs —
    /// redb cannot offer "survives a process crash without fsync". Every
    /// [`DURABLE_EVERY`]th put commits with `Immediate` (deletes do not
    /// count and commit with the base durability, as with redb 2):
    /// in redb 2 the pages freed by non-durable commits were reused only
    /// after a durable one, and without it the file grew to many times the
    /// data it held. redb 3+ also frees, in non-durable commits, pages that
    /// earlier non-durable commits allocated, but pages of the last durable
    /// state still wait for a durable commit, so the periodic `Immediate`
    /// commit stays (it also keeps runs comparable with the redb 2 ones).
    #[cfg(feature = "redb")]
    pub const DURABLE_EVERY: u64 = 1024;

    /// redb 4; see [`DURABLE_EVERY`] for its durability.
    #[cfg(feature = "redb")]
    pub mod redb {
        use super::*;
        use ::redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

        const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");

        pub struct RedbEngine {
            db: Database,
            durability: Durability,
            writes: std::sync::atomic::AtomicU64,
        }

        impl RedbEngine {
            pub fn open(dir: &Path, c: &BenchConfig) -> Result<Self> {
                std::fs::create_dir_all(dir).map_err(err)?;
                let db = ::redb::Builder::new()
                    .set_cache_size(c.cache_size + c.write_buffer_size)
                    .create(dir.join("bench.redb"))
                    .map_err(err)?;
                let tx = db.begin_write().map_err(err)?;
                tx.open_table(TABLE).map_err(err)?;
                tx.commit().map_err(err)?;
                Ok(RedbEngine {
                    db,
                    durability: if c.sync {
                        Durability::Immediate
                    } else {
                        Durability::None
                    },
                    writes: std::sync::atomic::AtomicU64::new(0),
                })
            }

            fn durability(&self) -> Durability {
                let n = self
                    .writes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n % super::DURABLE_EVERY == super::DURABLE_EVERY - 1 {
                    Durability::Immediate
                } else {
                    self.durability
                }
            }
        }

        impl Engine for RedbEngine {
            fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
                let mut tx = self.db.begin_write().map_err(err)?;
                tx.set_durability(self.durability()).map_err(err)?;
                tx.open_table(TABLE)
                    .map_err(err)?
                    .insert(key, value)
                    .map_err(err)?;
                tx.commit().map_err(err)
            }
            fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
                let tx = self.db.begin_read().map_err(err)?;
                let t = tx.open_table(TABLE).map_err(err)?;
                Ok(t.get(key).map_err(err)?.map(|v| v.value().to_vec()))
            }
            fn delete(&self, key: &[u8]) -> Result<()> {
                let mut tx = self.db.begin_write().map_err(err)?;
                tx.set_durability(self.durability).map_err(err)?;
                tx.open_table(TABLE)
                    .map_err(err)?
                    .remove(key)
                    .map_err(err)?;
                tx.commit().map_err(err)
            }
            fn scan(
                &self,
                start: Option<&[u8]>,
                reverse: bool,
                limit: u64,
                visit: &mut dyn FnMut(&[u8], &[u8]),
            ) -> Result<u64> {
                let tx = self.db.begin_read().map_err(err)?;
                let t = tx.open_table(TABLE).map_err(err)?;
                let range = match (start, reverse) {
                    (None, _) => t.iter().map_err(err)?,
                    (Some(k), false) => t.range(k..).map_err(err)?,
                    (Some(k), true) => t.range(..=k).map_err(err)?,
                };
                let mut n = 0;
                let mut each = |item: std::result::Result<_, ::redb::StorageError>| {
                    let (k, v): (::redb::AccessGuard<&[u8]>, ::redb::AccessGuard<&[u8]>) =
                        item.map_err(err)?;
                    visit(k.value(), v.value());
                    n += 1;
                    Ok::<_, Error>(())
                };
                if reverse {
                    range.rev().take(limit as usize).try_for_each(&mut each)?;
                } else {
                    range.take(limit as usize).try_for_each(&mut each)?;
                }
                Ok(n)
            }
            fn scan_range(
                &self,
                start: &[u8],
                end: &[u8],
                limit: u64,
                visit: &mut dyn FnMut(&[u8], &[u8]),
            ) -> Result<u64> {
                let tx = self.db.begin_read().map_err(err)?;
                let t = tx.open_table(TABLE).map_err(err)?;
                let mut n = 0;
                for item in t.range(start..end).map_err(err)?.take(limit as usize) {
                    let (k, v) = item.map_err(err)?;
                    visit(k.value(), v.value());
                    n += 1;
                }
                Ok(n)
            }
            fn stats(&self) -> Value {
                json!({ "durability_without_sync": "none (redb has no WAL)" })
            }
            fn close(self: Box<Self>) -> Result<()> {
                // Make the last Durability::None commits durable.
                let mut tx = self.db.begin_write().map_err(err)?;
                tx.set_durability(Durability::Immediate).map_err(err)?;
                tx.commit().map_err(err)
            }
        }
    }
}
