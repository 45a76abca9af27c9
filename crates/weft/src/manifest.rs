//! The manifest: a log of [`VersionEdit`]s that, replayed, gives the set of
//! live tables, the partition bounds and the counters.
//!
//! Files in the manifest are framed and checksummed by [`crate::wal`]. Each
//! edit is one record, fsynced before the change it describes is acted on
//! (a table is live only once its edit is durable; a file is deleted only
//! after the edit that drops it is durable). `CURRENT` names the live manifest
//! and is replaced atomically (write temp, fsync, rename, fsync directory).
//! Every open writes a fresh manifest holding one snapshot edit, so the log
//! never grows without bound across restarts.
//!
//! Edit encoding: a sequence of tagged fields, integers as varint64, byte
//! strings length-prefixed:
//!
//! ```text
//! 1 log_number | 2 next_file_number | 3 last_sequence
//! 4 partition: id, lower, has_upper u8, [upper]   5 drop partition: id
//! 6 add file: partition, placement u8, number, size, entries, smallest, largest
//! 7 remove file: partition, number
//! 8 add value log: partition, number, size     (a partition's reference to a log)
//! 9 drop value-log reference: partition, number (the log dies with its last reference)
//! 10 value-log garbage: number, bytes           (added to the log's dead bytes)
//! 11 index checkpoint: partition, number        (replaces the partition's previous one)
//! 12 format version: varint                     (first field of every snapshot edit)
//! 13 retain WAL: number, size, first_seq, last_seq (a flushed WAL kept for the change feed)
//! 14 feed hold: name, seq                       (sets the hold: it needs every batch from seq on)
//! 15 feed hold dropped: name
//! 16 range tombstone: seq, start, end, count, partition* (sets the pending
//!                     partitions of the tombstone of that sequence; none: dropped)
//! ```
//!
//! A retained WAL (tag 13) lives while some hold's sequence is at or below
//! its last sequence: replaying an edit that raises or drops holds drops
//! the WALs no hold pins any more, so that rule needs no tag of its own
//! and cannot disagree with the holds (`docs/DESIGN.md` §1.5.1).
//!
//! The store format version ([`FORMAT_VERSION`]) covers the WAL, write
//! batches, value logs, the manifest and file naming. Every open writes a
//! fresh manifest whose snapshot edit starts with it; a manifest without it
//! was written before the version was recorded (format 1) and is upgraded
//! by that fresh manifest; a newer version is refused with
//! [`Error::Unsupported`] before anything is written (`docs/DESIGN.md` §3).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::filename;
use crate::range_delete::{RangeTombstone, StoredRangeTombstone, StoredRangeTombstones};
use crate::store::{FileMeta, Placement};
use crate::util::coding::{get_varint64, put_varint64};
use crate::util::fs::{write_new_synced, FileSystem};
use crate::wal::{LogRead, LogReader, LogWriter};

/// The store format version this build reads and writes. 2: a WAL started
/// by a rotation begins with a link record (`wal::LogLink`). 3: a write
/// batch may hold logged puts (op kind 3, `crate::batch`), and a flushed
/// WAL may stay as a value log (`NNNNNN.log` below the log number, named
/// by tag 8 like a `.vlog`). 4: the change feed's edit tags 13–15
/// (retained WALs, holds), which a format-3 build would reject as unknown
/// tags (corruption) rather than as a newer store. 5: compressed table
/// blocks (block types 1 and 2) and compressed values in value logs (a
/// value pointer's codec byte), which a format-4 build would report as
/// corruption rather than as a newer store. 6: range deletes (batch op
/// kind 5, edit tag 16), which a format-5 build would reject as malformed
/// batches or unknown tags. 7: keyspaces (`db::keyspace`): keys of
/// keyspaces other than the default one and the keyspace registry stored
/// under a reserved prefix, which a format-6 build would show as keys of
/// its one key space. 8: per-keyspace options (`crate::keyspace_options`):
/// a registry row may hold options after the id, which a format-7 build
/// would report as a damaged row rather than as a newer store.
pub const FORMAT_VERSION: u64 = 8;

/// Tag of the format-version field.
const FORMAT_VERSION_TAG: u8 = 12;

/// A change to the store's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// The store format version (only in a manifest's snapshot edit).
    pub format_version: Option<u64>,
    /// WALs numbered below this are no longer needed.
    pub log_number: Option<u64>,
    /// Next unused file number.
    pub next_file_number: Option<u64>,
    /// Highest sequence number persisted in tables.
    pub last_sequence: Option<u64>,
    /// Partitions created (id, lower, upper).
    pub new_partitions: Vec<(u64, Vec<u8>, Option<Vec<u8>>)>,
    /// Partitions removed.
    pub removed_partitions: Vec<u64>,
    /// Tables added (partition, placement, metadata).
    pub added_files: Vec<(u64, Placement, FileMeta)>,
    /// Tables removed (partition, file number).
    pub removed_files: Vec<(u64, u64)>,
    /// Value logs referenced by a partition (partition, number, size).
    pub added_value_logs: Vec<(u64, u64, u64)>,
    /// Value-log references dropped (partition, number).
    pub dropped_value_logs: Vec<(u64, u64)>,
    /// Dead bytes found in value logs (number, bytes).
    pub value_log_garbage: Vec<(u64, u64)>,
    /// Hash-index checkpoints written (partition, file number).
    pub index_checkpoints: Vec<(u64, u64)>,
    /// WALs kept for the change feed (number, what they hold).
    pub retained_wals: Vec<(u64, RetainedWal)>,
    /// Change-feed holds set (name, the first sequence the holder needs).
    pub holds: Vec<(String, u64)>,
    /// Change-feed holds dropped (name).
    pub dropped_holds: Vec<String>,
    /// Range tombstones added or changed, each replacing the one of its
    /// sequence; one pending in no partition is dropped
    /// (`crate::range_delete`).
    pub range_tombstones: Vec<StoredRangeTombstone>,
}

/// A flushed WAL kept for the change feed (tag 13), or one the feed reads
/// while it is still replayed or appended to: its file number names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetainedWal {
    /// Bytes of whole records in it: the feed reads no further (a
    /// recovered WAL may have a torn tail after them, reserved zeros, or
    /// both).
    pub size: u64,
    /// The lowest sequence it may hold.
    pub first_seq: u64,
    /// The highest sequence it may hold.
    pub last_seq: u64,
}

/// Longest name a change-feed hold may have, in bytes.
pub const MAX_HOLD_NAME: usize = 255;

/// Whether any of `holds` (each the first sequence its holder needs) needs
/// a WAL whose sequences end at `last_seq`: the one retention rule of the
/// change feed, shared by the manifest's replay and the engine.
pub fn holds_pin<'a>(holds: impl IntoIterator<Item = &'a u64>, last_seq: u64) -> bool {
    holds.into_iter().any(|&h| h <= last_seq)
}

fn put_bytes(dst: &mut Vec<u8>, b: &[u8]) {
    put_varint64(dst, b.len() as u64);
    dst.extend_from_slice(b);
}

struct Decoder<'a> {
    data: &'a [u8],
}

impl<'a> Decoder<'a> {
    fn varint(&mut self) -> std::result::Result<u64, String> {
        let (v, pos) = get_varint64(self.data, 0).ok_or("truncated or overlong varint")?;
        self.data = &self.data[pos..];
        Ok(v)
    }

    fn bytes(&mut self) -> std::result::Result<Vec<u8>, String> {
        let n = self.varint()?;
        if n > self.data.len() as u64 {
            return Err(format!("byte string of {n} bytes past end of record"));
        }
        let (b, rest) = self.data.split_at(n as usize);
        self.data = rest;
        Ok(b.to_vec())
    }

    /// A hold's name: UTF-8 of at most [`MAX_HOLD_NAME`] bytes, as
    /// `Db::hold_changes` accepts.
    fn hold_name(&mut self) -> std::result::Result<String, String> {
        let b = self.bytes()?;
        if b.is_empty() || b.len() > MAX_HOLD_NAME {
            return Err(format!("hold name of {} bytes", b.len()));
        }
        String::from_utf8(b).map_err(|_| "hold name is not UTF-8".to_string())
    }

    fn byte(&mut self) -> std::result::Result<u8, String> {
        let Some((&b, rest)) = self.data.split_first() else {
            return Err("truncated record".into());
        };
        self.data = rest;
        Ok(b)
    }
}

impl VersionEdit {
    /// Encodes the edit as a manifest record payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        // First, so a reader learns the version before any field whose
        // encoding a later version may change.
        if let Some(v) = self.format_version {
            b.push(FORMAT_VERSION_TAG);
            put_varint64(&mut b, v);
        }
        if let Some(v) = self.log_number {
            b.push(1);
            put_varint64(&mut b, v);
        }
        if let Some(v) = self.next_file_number {
            b.push(2);
            put_varint64(&mut b, v);
        }
        if let Some(v) = self.last_sequence {
            b.push(3);
            put_varint64(&mut b, v);
        }
        for (id, lower, upper) in &self.new_partitions {
            b.push(4);
            put_varint64(&mut b, *id);
            put_bytes(&mut b, lower);
            match upper {
                Some(u) => {
                    b.push(1);
                    put_bytes(&mut b, u);
                }
                None => b.push(0),
            }
        }
        for id in &self.removed_partitions {
            b.push(5);
            put_varint64(&mut b, *id);
        }
        for (p, placement, m) in &self.added_files {
            b.push(6);
            put_varint64(&mut b, *p);
            b.push(match placement {
                Placement::Unsorted => 0,
                Placement::Sorted => 1,
            });
            put_varint64(&mut b, m.number);
            put_varint64(&mut b, m.size);
            put_varint64(&mut b, m.entries);
            put_bytes(&mut b, &m.smallest);
            put_bytes(&mut b, &m.largest);
        }
        for (p, n) in &self.removed_files {
            b.push(7);
            put_varint64(&mut b, *p);
            put_varint64(&mut b, *n);
        }
        for (p, n, size) in &self.added_value_logs {
            b.push(8);
            put_varint64(&mut b, *p);
            put_varint64(&mut b, *n);
            put_varint64(&mut b, *size);
        }
        for (p, n) in &self.dropped_value_logs {
            b.push(9);
            put_varint64(&mut b, *p);
            put_varint64(&mut b, *n);
        }
        for (n, bytes) in &self.value_log_garbage {
            b.push(10);
            put_varint64(&mut b, *n);
            put_varint64(&mut b, *bytes);
        }
        for (p, n) in &self.index_checkpoints {
            b.push(11);
            put_varint64(&mut b, *p);
            put_varint64(&mut b, *n);
        }
        for (n, w) in &self.retained_wals {
            b.push(13);
            put_varint64(&mut b, *n);
            put_varint64(&mut b, w.size);
            put_varint64(&mut b, w.first_seq);
            put_varint64(&mut b, w.last_seq);
        }
        for (name, seq) in &self.holds {
            b.push(14);
            put_bytes(&mut b, name.as_bytes());
            put_varint64(&mut b, *seq);
        }
        for name in &self.dropped_holds {
            b.push(15);
            put_bytes(&mut b, name.as_bytes());
        }
        for t in &self.range_tombstones {
            b.push(16);
            put_varint64(&mut b, t.tombstone.seq);
            put_bytes(&mut b, &t.tombstone.start);
            put_bytes(&mut b, &t.tombstone.end);
            put_varint64(&mut b, t.pending.len() as u64);
            for p in &t.pending {
                put_varint64(&mut b, *p);
            }
        }
        b
    }

    /// Decodes a manifest record payload.
    pub fn decode(data: &[u8]) -> std::result::Result<VersionEdit, String> {
        let mut d = Decoder { data };
        let mut e = VersionEdit::default();
        while !d.data.is_empty() {
            match d.byte()? {
                1 => e.log_number = Some(d.varint()?),
                2 => e.next_file_number = Some(d.varint()?),
                3 => e.last_sequence = Some(d.varint()?),
                4 => {
                    let id = d.varint()?;
                    let lower = d.bytes()?;
                    let upper = match d.byte()? {
                        0 => None,
                        1 => Some(d.bytes()?),
                        t => return Err(format!("bad upper-bound flag {t}")),
                    };
                    e.new_partitions.push((id, lower, upper));
                }
                5 => e.removed_partitions.push(d.varint()?),
                6 => {
                    let p = d.varint()?;
                    let placement = match d.byte()? {
                        0 => Placement::Unsorted,
                        1 => Placement::Sorted,
                        t => return Err(format!("bad placement {t}")),
                    };
                    let m = FileMeta {
                        number: d.varint()?,
                        size: d.varint()?,
                        entries: d.varint()?,
                        smallest: d.bytes()?,
                        largest: d.bytes()?,
                    };
                    if crate::key::parse_internal_key(&m.smallest).is_none()
                        || crate::key::parse_internal_key(&m.largest).is_none()
                    {
                        return Err(format!("table {} has malformed bounds", m.number));
                    }
                    e.added_files.push((p, placement, m));
                }
                7 => e.removed_files.push((d.varint()?, d.varint()?)),
                8 => e
                    .added_value_logs
                    .push((d.varint()?, d.varint()?, d.varint()?)),
                9 => e.dropped_value_logs.push((d.varint()?, d.varint()?)),
                10 => e.value_log_garbage.push((d.varint()?, d.varint()?)),
                11 => e.index_checkpoints.push((d.varint()?, d.varint()?)),
                13 => {
                    let n = d.varint()?;
                    let w = RetainedWal {
                        size: d.varint()?,
                        first_seq: d.varint()?,
                        last_seq: d.varint()?,
                    };
                    e.retained_wals.push((n, w));
                }
                14 => {
                    let name = d.hold_name()?;
                    e.holds.push((name, d.varint()?));
                }
                15 => e.dropped_holds.push(d.hold_name()?),
                16 => {
                    let seq = d.varint()?;
                    let (start, end) = (d.bytes()?, d.bytes()?);
                    if start >= end {
                        return Err(format!("range tombstone {seq} has an empty range"));
                    }
                    let n = d.varint()?;
                    // Each partition id takes a byte at least.
                    if n > d.data.len() as u64 {
                        return Err(format!("range tombstone {seq} names {n} partitions"));
                    }
                    let mut pending = BTreeSet::new();
                    for _ in 0..n {
                        pending.insert(d.varint()?);
                    }
                    e.range_tombstones.push(StoredRangeTombstone {
                        tombstone: RangeTombstone { start, end, seq },
                        pending,
                    });
                }
                FORMAT_VERSION_TAG => e.format_version = Some(d.varint()?),
                t => return Err(format!("unknown edit tag {t}")),
            }
        }
        Ok(e)
    }

    /// An edit that swaps partition `pid`'s tables numbered `inputs` for
    /// `outputs`, placed at `placement`: what a merge, GC or consolidation
    /// records (each adds its own other fields).
    pub fn replace_tables(
        pid: u64,
        placement: Placement,
        outputs: &[FileMeta],
        inputs: impl IntoIterator<Item = u64>,
    ) -> VersionEdit {
        VersionEdit {
            added_files: outputs
                .iter()
                .map(|f| (pid, placement, f.clone()))
                .collect(),
            removed_files: inputs.into_iter().map(|n| (pid, n)).collect(),
            ..Default::default()
        }
    }

    /// The format version an encoded edit starts with, if it does: read
    /// before the rest is decoded, whose fields a newer version may have
    /// changed.
    pub fn leading_format_version(data: &[u8]) -> Option<u64> {
        match data.split_first() {
            Some((&FORMAT_VERSION_TAG, rest)) => get_varint64(rest, 0).map(|(v, _)| v),
            _ => None,
        }
    }
}

/// Metadata of one partition as the manifest describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionMeta {
    /// Inclusive lower bound.
    pub lower: Vec<u8>,
    /// Exclusive upper bound.
    pub upper: Option<Vec<u8>>,
    /// UnsortedStore tables by file number (= flush order).
    pub unsorted: BTreeMap<u64, FileMeta>,
    /// SortedStore tables by file number.
    pub sorted: BTreeMap<u64, FileMeta>,
}

/// A value log as the manifest describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueLogMeta {
    /// Size in bytes.
    pub size: u64,
    /// Bytes of values no longer referenced by any SortedStore entry.
    pub garbage: u64,
    /// Partitions whose SortedStore may point into the log.
    pub refs: std::collections::BTreeSet<u64>,
}

/// The metadata a manifest replays to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestState {
    /// The store format version the manifest recorded (0: none, a
    /// manifest written before versions were recorded, which is format 1).
    pub format_version: u64,
    /// Oldest WAL still needed.
    pub log_number: u64,
    /// Next unused file number.
    pub next_file_number: u64,
    /// Highest sequence persisted in tables.
    pub last_sequence: u64,
    /// Partitions by id.
    pub partitions: BTreeMap<u64, PartitionMeta>,
    /// Live value logs by number.
    pub value_logs: BTreeMap<u64, ValueLogMeta>,
    /// Latest hash-index checkpoint file of each partition.
    pub index_checkpoints: BTreeMap<u64, u64>,
    /// Flushed WALs kept for the change feed, by number.
    pub retained_wals: BTreeMap<u64, RetainedWal>,
    /// Change-feed holds: name → the first sequence the holder needs.
    pub holds: BTreeMap<String, u64>,
    /// Flushed range tombstones, with the partitions each is pending in.
    pub range_tombstones: StoredRangeTombstones,
}

impl ManifestState {
    /// Whether a hold needs a WAL whose sequences end at `last_seq`.
    pub fn holds_pin(&self, last_seq: u64) -> bool {
        holds_pin(self.holds.values(), last_seq)
    }

    /// Applies one edit; errors describe an inconsistent log.
    pub fn apply(&mut self, e: &VersionEdit) -> std::result::Result<(), String> {
        // Weft never hands out such a number (`filename::MAX_FILE_NUMBER`):
        // a record naming one is damaged, and taking it would wrap the
        // numbering.
        let max = filename::MAX_FILE_NUMBER;
        let mut named = (e.added_files.iter().map(|(_, _, m)| m.number))
            .chain(e.added_value_logs.iter().map(|(_, n, _)| *n))
            .chain(e.retained_wals.iter().map(|(n, _)| *n))
            .chain(e.index_checkpoints.iter().map(|(_, n)| *n));
        let next = e.next_file_number.filter(|n| *n > max);
        if let Some(n) = next.or_else(|| named.find(|n| *n >= max)) {
            return Err(format!(
                "file number {n} is past the largest Weft hands out ({max})"
            ));
        }
        if let Some(v) = e.format_version {
            self.format_version = v;
        }
        if let Some(v) = e.log_number {
            self.log_number = v;
        }
        if let Some(v) = e.next_file_number {
            self.next_file_number = v;
        }
        if let Some(v) = e.last_sequence {
            self.last_sequence = v;
        }
        for (id, lower, upper) in &e.new_partitions {
            self.partitions.insert(
                *id,
                PartitionMeta {
                    lower: lower.clone(),
                    upper: upper.clone(),
                    ..Default::default()
                },
            );
        }
        for (p, n) in &e.removed_files {
            let part = self
                .partitions
                .get_mut(p)
                .ok_or_else(|| format!("edit removes table {n} from unknown partition {p}"))?;
            if part.unsorted.remove(n).is_none() && part.sorted.remove(n).is_none() {
                return Err(format!("edit removes table {n} not in partition {p}"));
            }
        }
        for (p, placement, m) in &e.added_files {
            let part = self
                .partitions
                .get_mut(p)
                .ok_or_else(|| format!("edit adds table {} to unknown partition {p}", m.number))?;
            let map = match placement {
                Placement::Unsorted => &mut part.unsorted,
                Placement::Sorted => &mut part.sorted,
            };
            map.insert(m.number, m.clone());
            self.next_file_number = self.next_file_number.max(m.number + 1);
        }
        for (p, n, size) in &e.added_value_logs {
            let log = self.value_logs.entry(*n).or_default();
            log.size = *size;
            log.refs.insert(*p);
            self.next_file_number = self.next_file_number.max(n + 1);
        }
        for (n, bytes) in &e.value_log_garbage {
            if let Some(log) = self.value_logs.get_mut(n) {
                log.garbage = log.garbage.saturating_add(*bytes).min(log.size);
            }
        }
        for (p, n) in &e.dropped_value_logs {
            let log = self
                .value_logs
                .get_mut(n)
                .ok_or_else(|| format!("edit drops unknown value log {n}"))?;
            if !log.refs.remove(p) {
                return Err(format!(
                    "edit drops value log {n} from partition {p}, which does not reference it"
                ));
            }
            if log.refs.is_empty() {
                self.value_logs.remove(n);
            }
        }
        for (p, n) in &e.index_checkpoints {
            if !self.partitions.contains_key(p) {
                return Err(format!("index checkpoint {n} for unknown partition {p}"));
            }
            self.index_checkpoints.insert(*p, *n);
            self.next_file_number = self.next_file_number.max(n + 1);
        }
        for id in &e.removed_partitions {
            self.partitions.remove(id);
            self.index_checkpoints.remove(id);
        }
        if !e.range_tombstones.is_empty() {
            for t in &e.range_tombstones {
                if let Some(p) = t.pending.iter().find(|p| !self.partitions.contains_key(p)) {
                    return Err(format!(
                        "range tombstone {} is pending in unknown partition {p}",
                        t.tombstone.seq
                    ));
                }
            }
            self.range_tombstones = self.range_tombstones.with(e.range_tombstones.clone());
        }
        // The feed last: 15, 14, 13, then the WALs no hold pins go.
        for name in &e.dropped_holds {
            self.holds.remove(name);
        }
        for (name, seq) in &e.holds {
            self.holds.insert(name.clone(), *seq);
        }
        for (n, w) in &e.retained_wals {
            if w.first_seq > w.last_seq.saturating_add(1) {
                return Err(format!(
                    "retained WAL {n} holds sequences {} to {}",
                    w.first_seq, w.last_seq
                ));
            }
            self.retained_wals.insert(*n, *w);
            self.next_file_number = self.next_file_number.max(n + 1);
        }
        let holds = &self.holds;
        self.retained_wals
            .retain(|_, w| holds_pin(holds.values(), w.last_seq));
        Ok(())
    }

    /// One edit that recreates this state from nothing.
    pub fn snapshot_edit(&self) -> VersionEdit {
        let mut e = VersionEdit {
            // Always this build's: a manifest is rewritten at every open,
            // which is how an older store is upgraded.
            format_version: Some(FORMAT_VERSION),
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            ..Default::default()
        };
        for (id, p) in &self.partitions {
            e.new_partitions
                .push((*id, p.lower.clone(), p.upper.clone()));
            for m in p.unsorted.values() {
                e.added_files.push((*id, Placement::Unsorted, m.clone()));
            }
            for m in p.sorted.values() {
                e.added_files.push((*id, Placement::Sorted, m.clone()));
            }
        }
        for (n, log) in &self.value_logs {
            for p in &log.refs {
                e.added_value_logs.push((*p, *n, log.size));
            }
            if log.garbage > 0 {
                e.value_log_garbage.push((*n, log.garbage));
            }
        }
        for (p, n) in &self.index_checkpoints {
            e.index_checkpoints.push((*p, *n));
        }
        e.retained_wals = self.retained_wals.iter().map(|(n, w)| (*n, *w)).collect();
        e.holds = self.holds.iter().map(|(h, s)| (h.clone(), *s)).collect();
        e.range_tombstones = self.range_tombstones.iter().cloned().collect();
        e
    }

    /// `t`, replayed from a WAL, as a flushed tombstone pending in every
    /// partition it overlaps (`None`: an empty range, which covers
    /// nothing).
    pub fn stored_range_tombstone(&self, t: RangeTombstone) -> Option<StoredRangeTombstone> {
        crate::range_delete::stored(
            t,
            self.partitions
                .iter()
                .map(|(id, p)| (*id, p.lower.as_slice(), p.upper.as_deref())),
        )
    }

    /// Every live table number.
    pub fn live_tables(&self) -> impl Iterator<Item = u64> + '_ {
        self.partitions
            .values()
            .flat_map(|p| p.unsorted.keys().chain(p.sorted.keys()).copied())
    }
}

/// Reads CURRENT and replays the manifest it names.
#[cfg(test)]
pub fn recover(fs: &dyn FileSystem, dir: &Path) -> Result<(u64, ManifestState)> {
    recover_noting_tail(fs, dir).map(|(number, state, _)| (number, state))
}

/// A bad last record of a manifest that recovery dropped: its offset and
/// what failed. A crash can leave one (the edit being written when the
/// process died, never acted on); so can damage to a record that *was*
/// acted on, which only the files can tell apart (`db::open`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedTail {
    /// The manifest.
    pub path: PathBuf,
    /// Offset of the dropped record.
    pub offset: u64,
    /// Why it failed verification.
    pub reason: String,
}

/// [`recover`], also returning the bad last record it dropped, if any.
pub fn recover_noting_tail(
    fs: &dyn FileSystem,
    dir: &Path,
) -> Result<(u64, ManifestState, Option<DroppedTail>)> {
    let current = filename::current_path(dir);
    let text = fs
        .read(&current)
        .context(|| format!("reading {}", current.display()))?;
    let name = std::str::from_utf8(&text)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .filter(|s| !s.is_empty() && !s.contains('/'))
        .ok_or_else(|| Error::corruption(&current, 0, "CURRENT does not name a manifest"))?;
    let number = match filename::parse_file_name(name) {
        Some(filename::FileKind::Manifest(n)) => n,
        _ => {
            return Err(Error::corruption(
                &current,
                0,
                format!("CURRENT names {name:?}, not a manifest"),
            ))
        }
    };
    let path = filename::manifest_path(dir, number);
    let mut reader = LogReader::open(fs, &path)?;
    let mut state = ManifestState::default();
    let mut edits = 0;
    let mut dropped = None;
    loop {
        match reader.read()? {
            LogRead::Record { offset, payload } => {
                if let Some(found) = VersionEdit::leading_format_version(&payload) {
                    if found > FORMAT_VERSION {
                        return Err(Error::Unsupported {
                            path: path.clone(),
                            found,
                            supported: FORMAT_VERSION,
                        });
                    }
                }
                let edit = VersionEdit::decode(&payload)
                    .map_err(|r| Error::corruption(&path, offset, r))?;
                state
                    .apply(&edit)
                    .map_err(|r| Error::corruption(&path, offset, r))?;
                edits += 1;
            }
            LogRead::End => break,
            // The last edit was being written when the process died: it was
            // never acted on (edits are fsynced before use), so drop it —
            // unless the files show it was (the caller checks).
            LogRead::Bad {
                at_tail: true,
                offset,
                reason,
            } if edits > 0 => {
                dropped = Some(DroppedTail {
                    path: path.clone(),
                    offset,
                    reason,
                });
                break;
            }
            LogRead::Bad { offset, reason, .. } => {
                return Err(Error::corruption(&path, offset, reason))
            }
        }
    }
    if edits == 0 {
        return Err(Error::corruption(&path, 0, "manifest holds no edit"));
    }
    Ok((number, state, dropped))
}

/// The live manifest, appended to by the engine.
pub struct ManifestWriter {
    log: LogWriter,
    number: u64,
}

impl ManifestWriter {
    /// Creates manifest `number` holding `state` as one snapshot edit, and
    /// points CURRENT at it.
    pub fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
        state: &ManifestState,
    ) -> Result<(ManifestWriter, u64)> {
        let path = filename::manifest_path(dir, number);
        let mut log = LogWriter::create(fs, &path)?;
        let n = log.add_record(&state.snapshot_edit().encode())?;
        log.sync()?;
        set_current(fs, dir, number)?;
        Ok((ManifestWriter { log, number }, n))
    }

    /// The manifest slot of a read-only engine (`Db::open_read_only`):
    /// reports manifest `number` (the one the view was read from) and
    /// refuses every append ([`LogWriter::refusing`]).
    pub fn refusing(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<ManifestWriter> {
        let log = LogWriter::refusing(fs, dir, filename::manifest_path(dir, number))?;
        Ok(ManifestWriter { log, number })
    }

    /// Appends `edit` and fsyncs it. Returns bytes written.
    pub fn append(&mut self, edit: &VersionEdit) -> Result<u64> {
        let n = self.log.add_record(&edit.encode())?;
        self.log.sync()?;
        Ok(n)
    }

    /// This manifest's file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Bytes of whole records in the file (appends are synced at once).
    pub fn size(&self) -> u64 {
        self.log.size_in_file()
    }
}

/// The bytes of a manifest holding `state` as its one snapshot edit: what
/// [`ManifestWriter::create`] writes, built in memory (a backup stores it
/// without writing it into a database directory).
pub fn snapshot_image(state: &ManifestState) -> Result<Vec<u8>> {
    crate::wal::framed_record(&state.snapshot_edit().encode())
}

/// The bytes of a `CURRENT` naming manifest `number`.
pub fn current_contents(number: u64) -> String {
    format!("{}\n", filename::manifest_name(number))
}

fn set_current(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
    let tmp: PathBuf = dir.join("CURRENT.tmp");
    let cur = filename::current_path(dir);
    let name = current_contents(number);
    write_new_synced(fs, &tmp, name.as_bytes()).context(|| format!("writing {}", tmp.display()))?;
    fs.rename(&tmp, &cur)
        .context(|| format!("renaming {} to CURRENT", tmp.display()))?;
    fs.sync_dir(dir)
        .context(|| format!("syncing directory {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};
    use crate::util::fs::real;

    fn meta(n: u64) -> FileMeta {
        FileMeta {
            number: n,
            size: 100 + n,
            entries: 3,
            smallest: internal_key(b"a", 5, ValueKind::Put),
            largest: internal_key(b"z", 1, ValueKind::Delete),
        }
    }

    #[test]
    fn the_snapshot_image_is_what_create_writes() {
        let fs = real();
        let dir = tempfile::tempdir().unwrap();
        let mut state = ManifestState {
            log_number: 4,
            next_file_number: 9,
            last_sequence: 77,
            ..Default::default()
        };
        state.partitions.insert(0, PartitionMeta::default());
        ManifestWriter::create(&*fs, dir.path(), 8, &state).unwrap();
        let written = fs.read(&filename::manifest_path(dir.path(), 8)).unwrap();
        assert_eq!(snapshot_image(&state).unwrap(), written);
        let current = fs.read(&filename::current_path(dir.path())).unwrap();
        assert_eq!(current, current_contents(8).into_bytes());
        assert_eq!(recover(&*fs, dir.path()).unwrap().1.last_sequence, 77);
    }

    #[test]
    fn edit_round_trips() {
        let e = VersionEdit {
            log_number: Some(4),
            next_file_number: Some(9),
            last_sequence: Some(1 << 40),
            new_partitions: vec![(0, vec![], None), (1, b"m".to_vec(), Some(b"q".to_vec()))],
            removed_partitions: vec![2],
            added_files: vec![
                (0, Placement::Unsorted, meta(5)),
                (1, Placement::Sorted, meta(6)),
            ],
            removed_files: vec![(0, 3)],
            added_value_logs: vec![(0, 12, 4096), (1, 12, 4096)],
            dropped_value_logs: vec![(1, 10)],
            value_log_garbage: vec![(12, 100)],
            index_checkpoints: vec![(1, 13)],
            format_version: Some(FORMAT_VERSION),
            retained_wals: vec![(
                11,
                RetainedWal {
                    size: 4096,
                    first_seq: 7,
                    last_seq: 1 << 41,
                },
            )],
            holds: vec![("replica-1".into(), 9), ("backup".into(), 1 << 42)],
            dropped_holds: vec!["old".into()],
            range_tombstones: vec![
                tombstone(1 << 43, b"a", b"k", &[0, 1]),
                tombstone(9, b"x", b"y", &[]),
            ],
        };
        assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
    }

    fn tombstone(seq: u64, start: &[u8], end: &[u8], pending: &[u64]) -> StoredRangeTombstone {
        StoredRangeTombstone {
            tombstone: RangeTombstone {
                start: start.to_vec(),
                end: end.to_vec(),
                seq,
            },
            pending: pending.iter().copied().collect(),
        }
    }

    /// A range tombstone lives while it is pending in a partition, the
    /// snapshot edit recreates it, and one pending in an unknown partition
    /// or with an empty range is an inconsistent log.
    #[test]
    fn range_tombstones_live_while_pending() {
        let mut state = ManifestState::default();
        let parts = VersionEdit {
            new_partitions: vec![(0, vec![], Some(b"m".to_vec())), (1, b"m".to_vec(), None)],
            ..Default::default()
        };
        state.apply(&parts).unwrap();
        let add = VersionEdit {
            range_tombstones: vec![tombstone(7, b"c", b"p", &[0, 1])],
            ..Default::default()
        };
        state.apply(&add).unwrap();
        assert_eq!(state.range_tombstones.len(), 1);
        let mut again = ManifestState::default();
        again.apply(&state.snapshot_edit()).unwrap();
        assert_eq!(again.range_tombstones, state.range_tombstones);
        for pending in [&[1][..], &[]] {
            let e = VersionEdit {
                range_tombstones: vec![tombstone(7, b"c", b"p", pending)],
                ..Default::default()
            };
            state.apply(&e).unwrap();
        }
        assert!(state.range_tombstones.is_empty());
        let bad = VersionEdit {
            range_tombstones: vec![tombstone(8, b"c", b"p", &[5])],
            ..Default::default()
        };
        assert!(state
            .apply(&bad)
            .unwrap_err()
            .contains("unknown partition 5"));
        let mut empty = bad.encode();
        // Turn the end "p" into "c": an empty range.
        let at = empty.iter().rposition(|&b| b == b'p').unwrap();
        empty[at] = b'c';
        assert!(VersionEdit::decode(&empty)
            .unwrap_err()
            .contains("empty range"));
    }

    /// A retained WAL stays while a hold's sequence is at or below its last
    /// sequence, through raised and dropped holds, and the snapshot edit
    /// recreates both; an empty or non-UTF-8 hold name is corruption.
    #[test]
    fn retained_wals_live_while_a_hold_pins_them() {
        let wal = |first_seq, last_seq| RetainedWal {
            size: 100,
            first_seq,
            last_seq,
        };
        let mut s = ManifestState::default();
        s.apply(&VersionEdit {
            holds: vec![("a".into(), 5), ("b".into(), 15)],
            retained_wals: vec![(3, wal(1, 9)), (4, wal(10, 19)), (5, wal(20, 29))],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            s.retained_wals.keys().copied().collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert_eq!(s.next_file_number, 6);
        let again = {
            let mut t = ManifestState::default();
            t.apply(&s.snapshot_edit()).unwrap();
            t
        };
        assert_eq!(
            (&again.retained_wals, &again.holds),
            (&s.retained_wals, &s.holds)
        );
        s.apply(&VersionEdit {
            holds: vec![("a".into(), 12)],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.retained_wals.keys().copied().collect::<Vec<_>>(), [4, 5]);
        s.apply(&VersionEdit {
            dropped_holds: vec!["a".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.retained_wals.keys().copied().collect::<Vec<_>>(), [4, 5]);
        s.apply(&VersionEdit {
            holds: vec![("b".into(), 20)],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.retained_wals.keys().copied().collect::<Vec<_>>(), [5]);
        s.apply(&VersionEdit {
            dropped_holds: vec!["b".into()],
            ..Default::default()
        })
        .unwrap();
        assert!(s.retained_wals.is_empty() && s.holds.is_empty());
        // No hold: a WAL retained by the same edit goes at once.
        s.apply(&VersionEdit {
            retained_wals: vec![(6, wal(30, 39))],
            ..Default::default()
        })
        .unwrap();
        assert!(s.retained_wals.is_empty());
        for bad in [&b""[..], b"\xff"] {
            let mut enc = vec![15, bad.len() as u8];
            enc.extend_from_slice(bad);
            assert!(VersionEdit::decode(&enc).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn decode_rejects_every_truncation() {
        let e = VersionEdit {
            added_files: vec![(0, Placement::Unsorted, meta(5))],
            ..Default::default()
        };
        let enc = e.encode();
        for cut in 1..enc.len() {
            assert!(VersionEdit::decode(&enc[..cut]).is_err(), "cut {cut}");
        }
    }

    #[test]
    fn apply_tracks_files_and_rejects_unknown_removals() {
        let mut s = ManifestState::default();
        s.apply(&VersionEdit {
            new_partitions: vec![(0, vec![], None)],
            added_files: vec![(0, Placement::Unsorted, meta(5))],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.next_file_number, 6);
        assert_eq!(s.live_tables().collect::<Vec<_>>(), vec![5]);
        assert!(s
            .apply(&VersionEdit {
                removed_files: vec![(0, 99)],
                ..Default::default()
            })
            .is_err());
        s.apply(&VersionEdit {
            added_value_logs: vec![(0, 9, 1000), (1, 9, 1000)],
            value_log_garbage: vec![(9, 300)],
            ..Default::default()
        })
        .unwrap();
        s.apply(&VersionEdit {
            dropped_value_logs: vec![(1, 9)],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.value_logs[&9].refs.len(), 1);
        assert_eq!(s.value_logs[&9].garbage, 300);
        let snap = s.snapshot_edit();
        let mut t = ManifestState::default();
        t.apply(&snap).unwrap();
        // The same state, recorded in this build's format.
        assert_eq!(
            t,
            ManifestState {
                format_version: FORMAT_VERSION,
                ..s
            }
        );
    }

    /// Writes a manifest holding `edits` as its records and points CURRENT
    /// at it, as a build of any format version would.
    fn write_manifest(dir: &Path, number: u64, edits: &[VersionEdit]) {
        let mut log = LogWriter::create(&*real(), &filename::manifest_path(dir, number)).unwrap();
        for e in edits {
            log.add_record(&e.encode()).unwrap();
        }
        log.sync().unwrap();
        set_current(&*real(), dir, number).unwrap();
    }

    #[test]
    fn every_manifest_starts_with_this_builds_format_version() {
        let dir = tempfile::tempdir().unwrap();
        let state = ManifestState {
            next_file_number: 7,
            ..Default::default()
        };
        let (_w, _) = ManifestWriter::create(&*real(), dir.path(), 3, &state).unwrap();
        let (number, back) = recover(&*real(), dir.path()).unwrap();
        assert_eq!((number, back.format_version), (3, FORMAT_VERSION));
        let first = std::fs::read(filename::manifest_path(dir.path(), 3)).unwrap();
        let payload = &first[crate::util::crc::RECORD_HEADER_SIZE..];
        assert_eq!(payload[0], FORMAT_VERSION_TAG);
        assert_eq!(
            VersionEdit::leading_format_version(payload),
            Some(FORMAT_VERSION)
        );
    }

    /// A manifest from before the version was recorded is format 1: it
    /// reads, and says so with version 0 (the open that follows writes a
    /// fresh, versioned manifest).
    #[test]
    fn a_manifest_without_a_version_is_read_as_the_first_format() {
        let dir = tempfile::tempdir().unwrap();
        let old = VersionEdit {
            next_file_number: Some(5),
            new_partitions: vec![(0, vec![], None)],
            ..Default::default()
        };
        write_manifest(dir.path(), 2, &[old]);
        let (_, state) = recover(&*real(), dir.path()).unwrap();
        assert_eq!(state.format_version, 0);
        assert_eq!(state.next_file_number, 5);
        assert_eq!(state.snapshot_edit().format_version, Some(FORMAT_VERSION));
    }

    /// A newer format is refused by its version, even when the fields after
    /// it mean nothing to this build.
    #[test]
    fn a_newer_format_version_is_unsupported_not_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut newer = VersionEdit {
            format_version: Some(FORMAT_VERSION + 1),
            ..Default::default()
        }
        .encode();
        newer.push(0xee); // a tag this build has never heard of
        let path = filename::manifest_path(dir.path(), 4);
        let mut log = LogWriter::create(&*real(), &path).unwrap();
        log.add_record(&newer).unwrap();
        log.sync().unwrap();
        set_current(&*real(), dir.path(), 4).unwrap();
        match recover(&*real(), dir.path()) {
            Err(Error::Unsupported {
                path: p,
                found,
                supported,
            }) => {
                assert_eq!(
                    (p, found, supported),
                    (path, FORMAT_VERSION + 1, FORMAT_VERSION)
                );
            }
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    /// A record naming a file number Weft never hands out is damaged: taking
    /// it would wrap the numbering.
    #[test]
    fn apply_refuses_file_numbers_past_the_largest() {
        let max = filename::MAX_FILE_NUMBER;
        let mut s = ManifestState::default();
        s.apply(&VersionEdit {
            new_partitions: vec![(0, vec![], None)],
            added_files: vec![(0, Placement::Sorted, meta(max - 1))],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.next_file_number, max);
        for bad in [
            VersionEdit {
                added_files: vec![(0, Placement::Sorted, meta(max))],
                ..Default::default()
            },
            VersionEdit {
                added_value_logs: vec![(0, u64::MAX, 10)],
                ..Default::default()
            },
            VersionEdit {
                index_checkpoints: vec![(0, max)],
                ..Default::default()
            },
            VersionEdit {
                next_file_number: Some(max + 1),
                ..Default::default()
            },
        ] {
            let err = s.clone().apply(&bad).unwrap_err();
            assert!(err.contains("past the largest"), "{err}");
        }
    }
}
