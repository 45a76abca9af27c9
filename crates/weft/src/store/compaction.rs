//! Writing tables from a merged stream of versions: the common core of flush
//! (memtable → UnsortedStore table) and merge (UnsortedStore + SortedStore →
//! new SortedStore tables).
//!
//! **Which versions survive.** Live snapshots cut the sequence space into
//! stripes: a version belongs to the stripe of the oldest snapshot that can
//! see it (or to the "latest" stripe above every snapshot). A reader in a
//! stripe sees only the newest version of that stripe, so every older version
//! of the same key in the same stripe is dropped. When the output is the
//! bottom of the partition (a merge into the SortedStore: nothing older exists
//! anywhere), a tombstone with no surviving older version below it is dropped
//! too — it would shadow nothing. Flushes keep tombstones: older versions may
//! sit in tables below.
//!
//! The snapshot list is read when the job starts. That is safe: every version
//! in the input was already visible then, so a snapshot taken later reads at a
//! sequence at least as high as the input's highest, i.e. in the latest stripe,
//! whose newest versions are always kept.
//!
//! **Table cuts.** A user key's versions never straddle two output tables, so
//! a SortedStore lookup needs exactly one table.

use std::path::Path;

use super::value_log::{ValueLogWriter, ValuePointer};
use super::FileMeta;
use crate::compaction_filter::{CompactionFilter, FilterDecision, FilterEntry, ResolveValue};
use crate::error::Result;
use crate::iter::MergedEntries;
use crate::key::{SequenceNumber, ValueKind};
use crate::keyspace_options::KeyspaceSettings;
use crate::range_delete::RangeTombstoneSet;
use crate::table::{TableBuilder, TableOptions};

/// Which versions a job keeps.
#[derive(Debug, Clone)]
pub struct RetentionPolicy {
    /// Live snapshot sequences, ascending.
    pub snapshots: Vec<SequenceNumber>,
    /// Output is the bottom of the partition: drop tombstones that shadow nothing.
    pub bottommost: bool,
}

impl RetentionPolicy {
    fn stripe(&self, seq: SequenceNumber) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }
}

/// Where a job's output goes.
pub struct OutputSpec<'a> {
    /// The file system the output is written on.
    pub fs: &'a crate::util::fs::Fs,
    /// Database directory.
    pub dir: &'a Path,
    /// Table format options.
    pub table: TableOptions,
    /// Start a new table at the next user key once this size is reached
    /// (`u64::MAX` = one table).
    pub target_size: u64,
    /// Stop before this user key (partition upper bound).
    pub upper: Option<&'a [u8]>,
    /// Move values of at least this size to a new value log (merges into
    /// the SortedStore); `None` keeps every value inline (flushes).
    pub min_blob_size: Option<usize>,
    /// How the values moved to a new value log are compressed.
    pub value_log_compression: crate::Compression,
    /// The application's filter (`Options::compaction_filter`), for jobs
    /// that see a partition's whole on-disk history of the keys they
    /// rewrite (merges, GC); `None` elsewhere.
    pub filter: Option<JobFilter<'a>>,
    /// The range deletes the job applies (`crate::range_delete`), for the
    /// same jobs: each is a delete of every key it covers at its
    /// sequence, offered to the retention rules before the versions it
    /// is newer than.
    pub range_tombstones: Option<&'a RangeTombstoneSet>,
    /// Record each output table's distinct user keys in
    /// [`JobStats::table_keys`] (flushes, for the hash index).
    pub collect_keys: bool,
    /// Each keyspace's options, applied to its keys (DESIGN §4.14); `None`
    /// writes every key with the options above (the open's recovery
    /// flush, which runs before the registry is read, and unit tests).
    pub keyspaces: Option<KeyspaceOutputs<'a>>,
    /// A flush of a memtable whose WAL holds logged puts: a put logged
    /// there is written as a pointer into the WAL, not as its value
    /// (`Options::values_in_wal`).
    pub logged: Option<&'a super::logged_values::LoggedValues>,
}

/// Which of a key's keyspace options a job applies
/// (`crate::keyspace_options`). The options above in [`OutputSpec`] are
/// the default keyspace's; a key of another keyspace set apart gets its
/// own codec for the layer (a data block is cut where the codec changes,
/// so each block has one) and, in a job that separates values, its own
/// threshold and value-log codec (each record names its codec).
#[derive(Clone, Copy)]
pub struct KeyspaceOutputs<'a> {
    /// The keyspaces' options, as the job found them when it started.
    pub settings: &'a KeyspaceSettings,
    /// The layer the tables are written to: which codec applies.
    pub layer: Layer,
    /// The job separates values (merges, GC): each keyspace's
    /// `min_blob_size` and value-log codec apply. Flushes, splits and
    /// consolidations keep values where they are.
    pub separates: bool,
}

/// The layer a job writes tables to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Layer {
    /// UnsortedStore tables (flushes, consolidations).
    Unsorted,
    /// SortedStore tables (merges, GC, splits).
    Sorted,
}

/// How the current key's versions are written: its keyspace's options.
#[derive(Clone, Copy, PartialEq, Eq)]
struct KeyOutput {
    /// The data blocks' codec.
    codec: crate::Compression,
    /// Separate values of at least this size; `None`: keep them inline.
    min_blob_size: Option<usize>,
    /// The codec of values separated into the value log.
    value_log_compression: crate::Compression,
}

impl KeyOutput {
    /// What `spec` says for the default keyspace.
    fn of_spec(spec: &OutputSpec<'_>) -> KeyOutput {
        KeyOutput {
            codec: spec.table.compression,
            min_blob_size: spec.min_blob_size,
            value_log_compression: spec.value_log_compression,
        }
    }
}

/// A job's compaction filter and the way to read the separated values
/// it asks for.
#[derive(Clone, Copy)]
pub struct JobFilter<'a> {
    /// The application's filter.
    pub filter: &'a dyn CompactionFilter,
    /// Reads a separated value from its encoded pointer.
    pub resolve: &'a ResolveValue<'a>,
}

/// Counters of one job.
#[derive(Debug, Default, Clone)]
pub struct JobStats {
    /// Versions read from the input.
    pub input_entries: u64,
    /// Versions written.
    pub output_entries: u64,
    /// Bytes of tables written.
    pub bytes_written: u64,
    /// The value log written, if any: (file number, size).
    pub value_log: Option<(u64, u64)>,
    /// Dead bytes found per value log (pointers the job dropped).
    pub garbage: std::collections::BTreeMap<u64, u64>,
    /// Distinct user keys of each output table, when asked for.
    pub table_keys: Vec<(u64, super::KeyList)>,
    /// Bytes of logged-put records (header and value) the tables point to
    /// instead of holding the values ([`OutputSpec::logged`]).
    pub logged_bytes: u64,
    /// Partitions whose new tables point into the flushed WAL, with the
    /// bytes of logged-put records they point at (flushes).
    pub logged_partitions: Vec<(u64, u64)>,
    /// Versions the compaction filter removed.
    pub filtered: u64,
    /// The lowest sequence of a removed version.
    pub filtered_from: Option<SequenceNumber>,
    /// Versions dropped because a range delete the job applied shadows
    /// them.
    pub range_deleted: u64,
}

/// Writes the versions of `input` (positioned on its first entry) that
/// `policy` keeps into new tables, stopping at `spec.upper`. `new_file`
/// allocates a file number per table. Returns the tables written; the caller
/// makes them live through the manifest (or deletes them on error).
pub fn write_tables(
    input: &mut MergedEntries,
    policy: &RetentionPolicy,
    spec: &OutputSpec<'_>,
    new_file: &mut dyn FnMut() -> u64,
    stats: &mut JobStats,
) -> Result<Vec<FileMeta>> {
    let mut out = Outputs {
        spec,
        builder: None,
        done: Vec::new(),
        value_log: None,
        keys: Vec::new(),
        logged_bytes: 0,
        default_output: KeyOutput::of_spec(spec),
        current: KeyOutput::of_spec(spec),
    };
    let result = run(input, policy, &mut out, new_file, stats).and_then(|()| out.finish_current());
    let result = result.and_then(|()| match out.value_log.take() {
        Some(log) => {
            let number = log.number();
            let size = log.finish()?;
            stats.value_log = Some((number, size));
            stats.bytes_written += size;
            Ok(())
        }
        None => Ok(()),
    });
    match result {
        Ok(()) => {
            stats.bytes_written += out.done.iter().map(|m| m.size).sum::<u64>();
            stats.logged_bytes += out.logged_bytes;
            stats.table_keys.append(&mut out.keys);
            Ok(out.done)
        }
        Err(e) => {
            out.abandon();
            if let Some((number, _)) = stats.value_log.take() {
                let _ = spec
                    .fs
                    .remove_file(&crate::filename::value_log_path(spec.dir, number));
            }
            Err(e)
        }
    }
}

/// The retention decision for a stream of versions, one key at a time.
pub(crate) struct VersionFilter<'p> {
    policy: &'p RetentionPolicy,
    last_stripe: usize,
    /// Tombstones held back in a bottommost job until an older surviving
    /// version of the same key shows they are needed.
    deferred: Vec<SequenceNumber>,
}

/// What to do with one offered version.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Shadowed within its stripe.
    Drop,
    /// A bottommost tombstone, held back.
    Defer,
    /// Write these held-back tombstones (newest first), then the version.
    Emit(Vec<SequenceNumber>),
}

impl<'p> VersionFilter<'p> {
    pub(crate) fn new(policy: &'p RetentionPolicy) -> Self {
        VersionFilter {
            policy,
            last_stripe: usize::MAX,
            deferred: Vec::new(),
        }
    }

    /// True until the current key's first version is offered.
    pub(crate) fn at_key_start(&self) -> bool {
        self.last_stripe == usize::MAX
    }

    /// True for a version newer than every snapshot the policy protects.
    pub(crate) fn above_snapshots(&self, seq: SequenceNumber) -> bool {
        self.policy.stripe(seq) == self.policy.snapshots.len()
    }

    /// Starts a new user key (dropping tombstones held for the previous one).
    pub(crate) fn start_key(&mut self) {
        self.last_stripe = usize::MAX;
        self.deferred.clear();
    }

    /// Offers the next version of the current key (versions come newest first).
    pub(crate) fn offer(&mut self, seq: SequenceNumber, kind: ValueKind) -> Verdict {
        let stripe = self.policy.stripe(seq);
        if stripe == self.last_stripe {
            return Verdict::Drop;
        }
        self.last_stripe = stripe;
        if self.policy.bottommost && kind == ValueKind::Delete {
            self.deferred.push(seq);
            Verdict::Defer
        } else {
            Verdict::Emit(std::mem::take(&mut self.deferred))
        }
    }
}

fn run(
    input: &mut MergedEntries,
    policy: &RetentionPolicy,
    out: &mut Outputs<'_>,
    new_file: &mut dyn FnMut() -> u64,
    stats: &mut JobStats,
) -> Result<()> {
    let mut filter = VersionFilter::new(policy);
    let mut key: Vec<u8> = Vec::new();
    let mut have_key = false;
    let mut emitted_for_key = false;
    // The sequences of the range deletes covering the current key, newest
    // first, and how many were offered; whether one of them is the
    // newest version offered in the current stripe.
    let mut covering: &[SequenceNumber] = &[];
    let mut offered_deletes = 0;
    let mut range_delete_owns_stripe = false;
    while input.valid() {
        let e = input.entry();
        if let Some(upper) = out.spec.upper {
            if e.user_key() >= upper {
                break;
            }
        }
        stats.input_entries += 1;
        if !have_key || e.user_key() != key.as_slice() {
            key.clear();
            key.extend_from_slice(e.user_key());
            have_key = true;
            emitted_for_key = false;
            filter.start_key();
            covering = out.spec.range_tombstones.map_or(&[], |t| t.covering(&key));
            offered_deletes = 0;
            range_delete_owns_stripe = false;
        }
        // The range deletes newer than this version, as deletes of the key
        // (held back by a bottommost job, written as point tombstones only
        // where an older version survives for a snapshot).
        while let Some(&d) = covering.get(offered_deletes).filter(|&&d| d > e.seq()) {
            offered_deletes += 1;
            let verdict = filter.offer(d, ValueKind::Delete);
            range_delete_owns_stripe |= verdict != Verdict::Drop;
            if let Verdict::Emit(tombstones) = verdict {
                for d in tombstones.into_iter().chain([d]) {
                    out.add(&key, d, ValueKind::Delete, &[], !emitted_for_key, new_file)?;
                    emitted_for_key = true;
                    stats.output_entries += 1;
                }
            }
        }
        let e = input.entry();
        let mut kind = e.kind();
        if let Some(f) = out.spec.filter {
            if filter.at_key_start() && removed_by(f, &filter, &key, e)? {
                // A delete at the version's sequence, from here on: kept
                // only while an older version survives for a snapshot.
                if kind == ValueKind::Pointer {
                    if let Some(p) = ValuePointer::decode(e.value()) {
                        *stats.garbage.entry(p.log).or_default() += p.record_size();
                    }
                }
                kind = ValueKind::Delete;
                stats.filtered += 1;
                stats.filtered_from = Some(stats.filtered_from.map_or(e.seq(), |s| s.min(e.seq())));
            }
        }
        let verdict = filter.offer(e.seq(), kind);
        match verdict {
            Verdict::Drop if range_delete_owns_stripe => stats.range_deleted += 1,
            Verdict::Drop => {}
            _ => range_delete_owns_stripe = false,
        }
        if verdict == Verdict::Drop && kind == ValueKind::Pointer {
            // The value this pointer names is dead from now on.
            if let Some(p) = ValuePointer::decode(e.value()) {
                *stats.garbage.entry(p.log).or_default() += p.record_size();
            }
        }
        if let Verdict::Emit(tombstones) = verdict {
            for d in tombstones {
                out.add(&key, d, ValueKind::Delete, &[], !emitted_for_key, new_file)?;
                emitted_for_key = true;
                stats.output_entries += 1;
            }
            let e = input.entry();
            let value = if kind == ValueKind::Delete {
                &[][..]
            } else {
                e.value()
            };
            out.add(&key, e.seq(), kind, value, !emitted_for_key, new_file)?;
            emitted_for_key = true;
            stats.output_entries += 1;
        }
        input.next()?;
    }
    Ok(())
}

/// Asks the job's filter about `e`, the first version of `key` the job
/// sees, when it is a put newer than every snapshot (the module docs of
/// `compaction_filter`); a value read the filter asked for and could not
/// have fails the job.
fn removed_by(
    f: JobFilter<'_>,
    versions: &VersionFilter<'_>,
    key: &[u8],
    e: &dyn crate::iter::InternalIterator,
) -> Result<bool> {
    let kind = e.kind();
    if !matches!(kind, ValueKind::Put | ValueKind::Pointer) || !versions.above_snapshots(e.seq()) {
        return Ok(false);
    }
    let entry = FilterEntry::new(
        key,
        e.seq(),
        e.value(),
        kind == ValueKind::Pointer,
        f.resolve,
    );
    let decision = f.filter.filter(&entry);
    match entry.take_error() {
        Some(err) => Err(err),
        None => Ok(decision == FilterDecision::Remove),
    }
}

struct Outputs<'a> {
    spec: &'a OutputSpec<'a>,
    builder: Option<Building>,
    done: Vec<FileMeta>,
    value_log: Option<ValueLogWriter>,
    /// Keys of each table (when `spec.collect_keys`), the last one in progress.
    keys: Vec<(u64, super::KeyList)>,
    /// See [`JobStats::logged_bytes`].
    logged_bytes: u64,
    /// How the default keyspace's keys are written.
    default_output: KeyOutput,
    /// How the current key is written (its keyspace's options).
    current: KeyOutput,
}

struct Building {
    number: u64,
    builder: TableBuilder,
}

impl Outputs<'_> {
    fn add(
        &mut self,
        key: &[u8],
        seq: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
        starts_key: bool,
        new_file: &mut dyn FnMut() -> u64,
    ) -> Result<()> {
        if starts_key {
            if let Some(b) = &self.builder {
                if b.builder.estimated_size() >= self.spec.target_size {
                    self.finish_current()?;
                }
            }
            self.current = self.output_for(key);
        }
        if self.builder.is_none() {
            let number = new_file();
            let path = crate::filename::table_path(self.spec.dir, number);
            let builder = TableBuilder::create(&**self.spec.fs, &path, self.spec.table)?;
            self.builder = Some(Building { number, builder });
            if self.spec.collect_keys {
                self.keys.push((number, super::KeyList::default()));
            }
        }
        if let Some((_, keys)) = self.keys.last_mut() {
            keys.push_distinct(key);
        }
        if let Some(b) = self.builder.as_mut() {
            // Ends the block where the codec changes (a keyspace boundary).
            b.builder.set_compression(self.current.codec)?;
        }
        let logged = match (kind, self.spec.logged) {
            (ValueKind::Put, Some(l)) => l.pointer(seq, value.len()),
            _ => None,
        };
        if let Some(ptr) = logged {
            self.logged_bytes += ptr.record_size();
            let b = self.builder.as_mut().expect("builder was just created");
            return b.builder.add(key, seq, ValueKind::Pointer, &ptr.encode());
        }
        let separate =
            kind == ValueKind::Put && self.current.min_blob_size.is_some_and(|m| value.len() >= m);
        if separate {
            if self.value_log.is_none() {
                self.value_log = Some(ValueLogWriter::create_compressed(
                    self.spec.fs,
                    self.spec.dir,
                    new_file(),
                    self.spec.value_log_compression,
                )?);
            }
            let log = self.value_log.as_mut().expect("value log was just created");
            let ptr = log.append_compressed(value, self.current.value_log_compression)?;
            let b = self.builder.as_mut().expect("builder was just created");
            return b.builder.add(key, seq, ValueKind::Pointer, &ptr.encode());
        }
        let b = self.builder.as_mut().expect("builder was just created");
        b.builder.add(key, seq, kind, value)
    }

    /// How the versions of `key` are written: its keyspace's options
    /// where the job applies them, else the spec's.
    #[inline]
    fn output_for(&self, key: &[u8]) -> KeyOutput {
        let Some(ks) = self.spec.keyspaces.filter(|k| !k.settings.is_uniform()) else {
            return self.default_output;
        };
        let r = ks.settings.for_key(key);
        if std::ptr::eq(r, ks.settings.default_options()) {
            return self.default_output;
        }
        KeyOutput {
            codec: match ks.layer {
                Layer::Unsorted => r.unsorted_compression,
                Layer::Sorted => r.sorted_compression,
            },
            min_blob_size: match ks.separates {
                true => r.separate_from(),
                false => None,
            },
            value_log_compression: r.value_log_compression,
        }
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some(b) = self.builder.take() {
            let number = b.number;
            match b.builder.finish() {
                Ok(s) => self.done.push(FileMeta {
                    number,
                    size: s.file_size,
                    entries: s.entries,
                    smallest: s.smallest,
                    largest: s.largest,
                }),
                Err(e) => {
                    let path = crate::filename::table_path(self.spec.dir, number);
                    let _ = self.spec.fs.remove_file(&path);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Removes every table (and the value log) this job wrote (it failed).
    fn abandon(&mut self) {
        if let Some(log) = self.value_log.take() {
            log.abandon();
        }
        if let Some(b) = self.builder.take() {
            drop(b.builder);
            let path = crate::filename::table_path(self.spec.dir, b.number);
            let _ = self.spec.fs.remove_file(&path);
        }
        for m in self.done.drain(..) {
            let path = crate::filename::table_path(self.spec.dir, m.number);
            let _ = self.spec.fs.remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep(versions: &[(u64, ValueKind)], snapshots: &[u64], bottommost: bool) -> Vec<u64> {
        let policy = RetentionPolicy {
            snapshots: snapshots.to_vec(),
            bottommost,
        };
        let mut f = VersionFilter::new(&policy);
        f.start_key();
        let mut kept = vec![];
        for &(seq, kind) in versions {
            if let Verdict::Emit(t) = f.offer(seq, kind) {
                kept.extend(t);
                kept.push(seq);
            }
        }
        kept
    }

    #[test]
    fn stripes_keep_one_version_per_snapshot() {
        use ValueKind::*;
        assert_eq!(
            keep(&[(9, Put), (7, Put), (6, Put)], &[8], false),
            vec![9, 7]
        );
        assert_eq!(keep(&[(9, Put), (3, Put)], &[5, 8], false), vec![9, 3]);
        assert_eq!(keep(&[(9, Put), (7, Put)], &[], false), vec![9]);
        // Bottommost: a tombstone over nothing disappears...
        assert_eq!(keep(&[(9, Delete), (7, Put)], &[], true), Vec::<u64>::new());
        // ...but not when a snapshot still sees the older value.
        assert_eq!(keep(&[(9, Delete), (7, Put)], &[8], true), vec![9, 7]);
        // Not bottommost: tombstones stay.
        assert_eq!(keep(&[(9, Delete), (7, Put)], &[], false), vec![9]);
    }
}
