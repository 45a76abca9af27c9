//! The change feed: committed write batches, read back from the WALs in
//! sequence order, and the named holds that keep those WALs until their
//! consumers have read them (`docs/DESIGN.md` §1.5.1).
//!
//! Every logged batch is one record of one WAL, and WALs follow one
//! another in sequence order, so the feed needs no copy of its own: it
//! reads the WALs. What it adds is retention. A flushed WAL is normally
//! deleted (or kept only as long as tables point at the values logged in
//! it); while a hold's sequence is at or below a WAL's last sequence, the
//! WAL is *retained* instead, named by the manifest (tag 13), spared by
//! the open's sweep and by the GC that drops its last value-log reference.
//!
//! The retention rule is one predicate over the holds
//! ([`crate::manifest::holds_pin`]), which the manifest's replay applies
//! after every edit: raising or dropping a hold in the manifest is what
//! ends a WAL's retention there, so no edit of its own records it and the
//! two can never disagree. The engine applies the same rule to the holds
//! *as persisted* ([`FeedState::persisted`]) after every edit it appends,
//! and only then deletes the WALs no hold pins: a file goes only once the
//! edit that stops retaining it is durable (§5.1). A release raises its
//! hold in memory at once and reaches the manifest with the next edit
//! (any job's, [`crate::background`] adds it), unless it frees a WAL,
//! which it then writes itself: a crash in between retains more, never
//! less.
//!
//! Reading takes the list of WALs that may hold the sequences asked for,
//! each with the bytes of whole records it holds, under the state lock,
//! then reads them with no lock held: a retained WAL's recorded size, an
//! immutable memtable's WAL's size at its rotation, and for the active WAL
//! the bytes its appender has handed to the OS (`LogWriter::size_in_file`):
//! a reader never looks past them, where a mapped writer may be storing a
//! record now (a header still zero with its payload behind it would read
//! as damage). A WAL deleted meanwhile (no hold kept it) ends the read with
//! [`Error::ChangesReleased`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::core::{Core, Counters, EngineState};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::{SequenceNumber, ValueKind};
use crate::manifest::{holds_pin, VersionEdit, MAX_HOLD_NAME};
use crate::wal::{LogLink, LogRead, LogReader};

/// How far a [`ChangeFeed`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedLimit {
    /// Up to the highest sequence known to be fdatasynced (by a `sync`
    /// write, [`crate::Db::sync_wal`], a flush, or the recovery that
    /// opened the database) and visible. A machine crash loses none of
    /// these batches, so a replica that applies only them stays a prefix
    /// of the primary's history: the right limit for replication.
    Durable,
    /// Up to the visible sequence, and only what the WAL's appender has
    /// handed to the OS (with [`crate::Options::manual_wal_flush`], records
    /// still in its buffer are not read). A machine crash may lose the
    /// tail of this, and the sequences it held are then handed out again.
    Visible,
}

/// One operation of a [`ChangeGroup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeOp {
    /// `key` was set to `value` (a put logged with its value in the WAL
    /// record, `Options::values_in_wal`, is read back as its value).
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// `key` was deleted.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Every key in `[start, end)` was deleted (`Db::delete_range`).
    DeleteRange {
        /// The first key deleted.
        start: Vec<u8>,
        /// The first key past the range.
        end: Vec<u8>,
    },
}

impl ChangeOp {
    /// The key the operation writes (a range delete's first key).
    pub fn key(&self) -> &[u8] {
        match self {
            ChangeOp::Put { key, .. } | ChangeOp::Delete { key } => key,
            ChangeOp::DeleteRange { start, .. } => start,
        }
    }
}

/// A [`ChangeOp`] as the keyspaces see it ([`ChangeOp::keyspace_op`]):
/// the keyspace it writes, by id ([`crate::Keyspace::id`]; 0 is the
/// default keyspace, [`crate::Db::keyspace_name`] names the others), with
/// keys as that keyspace's handles take them, the reserved prefix
/// (DESIGN §4.14) removed; and the keyspace registry's own rows as the
/// creates and drops they record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyspaceOp<'a> {
    /// `key` of keyspace `keyspace` was set to `value`.
    Put {
        /// The keyspace's id.
        keyspace: u32,
        /// The key within the keyspace.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// `key` of keyspace `keyspace` was deleted.
    Delete {
        /// The keyspace's id.
        keyspace: u32,
        /// The key within the keyspace.
        key: &'a [u8],
    },
    /// Every key of keyspace `keyspace` in `[start, end)` was deleted;
    /// `end: None` is the keyspace's end (a drop's range delete covers
    /// its whole keyspace: `start` empty, `end` `None`).
    DeleteRange {
        /// The keyspace's id.
        keyspace: u32,
        /// The first key deleted.
        start: &'a [u8],
        /// The first key past the range, `None` for none.
        end: Option<&'a [u8]>,
    },
    /// Keyspace `name` was created with id `id` ([`crate::Db::keyspace`],
    /// [`crate::Db::create_keyspace`]).
    Created {
        /// Its name.
        name: &'a str,
        /// Its id.
        id: u32,
        /// The options it was created with (none set by `Db::keyspace`).
        options: crate::KeyspaceOptions,
    },
    /// Keyspace `name` was dropped ([`crate::Db::drop_keyspace`]); the
    /// same batch's range delete of its keyspace follows.
    Dropped {
        /// Its name.
        name: &'a str,
    },
    /// The registry's own bookkeeping (the next id to give out): nothing
    /// a consumer applying changes by keyspace needs.
    Registry,
}

impl ChangeOp {
    /// The operation as the keyspaces see it: the keyspace it writes and
    /// its keys within that keyspace, or the keyspace create or drop it
    /// records, so a consumer (a replica, an index) never parses the
    /// reserved prefix that stored keys of keyspaces other than the
    /// default one carry ([`ChangeOp::key`] and the variants' fields are
    /// the stored keys, which a byte-exact copy of the database applies).
    ///
    /// ```
    /// use weft::{Db, FeedLimit, KeyspaceOp, Options, WriteBatch, WriteOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// let users = db.keyspace("users").unwrap();
    /// let from = db.snapshot().sequence() + 1;
    /// let mut batch = WriteBatch::new();
    /// batch.put_in(&users, "42", "alice").put("plain", "x");
    /// db.write(batch, &WriteOptions::default()).unwrap();
    /// db.drop_keyspace("users").unwrap();
    ///
    /// let mut seen = Vec::new();
    /// for group in db.changes_from(from, FeedLimit::Visible).unwrap() {
    ///     for op in group.unwrap().ops() {
    ///         seen.push(format!("{:?}", op.keyspace_op()));
    ///     }
    /// }
    /// let id = users.id();
    /// assert_eq!(seen, vec![
    ///     format!("{:?}", KeyspaceOp::Put { keyspace: id, key: b"42", value: b"alice" }),
    ///     format!("{:?}", KeyspaceOp::Put { keyspace: 0, key: b"plain", value: b"x" }),
    ///     format!("{:?}", KeyspaceOp::Dropped { name: "users" }),
    ///     format!("{:?}", KeyspaceOp::DeleteRange { keyspace: id, start: b"", end: None }),
    /// ]);
    /// ```
    pub fn keyspace_op(&self) -> KeyspaceOp<'_> {
        use super::keyspace::{split_stored, REGISTRY_ID};
        match self {
            ChangeOp::Put { key, value } => match split_stored(key) {
                None => KeyspaceOp::Put {
                    keyspace: 0,
                    key,
                    value,
                },
                Some((REGISTRY_ID, name)) => {
                    // The id, then the options (DESIGN §4.14).
                    let row = value.split_at_checked(4).and_then(|(id, options)| {
                        let id = u32::from_be_bytes(id.try_into().ok()?);
                        Some((id, crate::KeyspaceOptions::decode(options).ok()?))
                    });
                    match (std::str::from_utf8(name), row) {
                        (Ok(name), Some((id, options))) if !name.is_empty() => {
                            KeyspaceOp::Created { name, id, options }
                        }
                        _ => KeyspaceOp::Registry,
                    }
                }
                Some((keyspace, key)) => KeyspaceOp::Put {
                    keyspace,
                    key,
                    value,
                },
            },
            ChangeOp::Delete { key } => match split_stored(key) {
                None => KeyspaceOp::Delete { keyspace: 0, key },
                Some((REGISTRY_ID, name)) => match std::str::from_utf8(name) {
                    Ok(name) if !name.is_empty() => KeyspaceOp::Dropped { name },
                    _ => KeyspaceOp::Registry,
                },
                Some((keyspace, key)) => KeyspaceOp::Delete { keyspace, key },
            },
            ChangeOp::DeleteRange { start, end } => match split_stored(start) {
                // A default range delete is cut around the reserved span
                // before it is logged (`WriteBatch::with_reserved_cut`).
                None => KeyspaceOp::DeleteRange {
                    keyspace: 0,
                    start,
                    end: Some(end),
                },
                Some((REGISTRY_ID, _)) => KeyspaceOp::Registry,
                Some((keyspace, start)) => KeyspaceOp::DeleteRange {
                    keyspace,
                    start,
                    end: match split_stored(end) {
                        Some((id, end)) if id == keyspace => Some(end),
                        _ => None,
                    },
                },
            },
        }
    }
}

/// One committed write batch, as the WAL logged it: operation `i` has
/// sequence `first_seq() + i`. Apply it whole to keep the batch atomic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeGroup {
    first_seq: SequenceNumber,
    ops: Vec<ChangeOp>,
}

impl ChangeGroup {
    /// The sequence of the first operation.
    pub fn first_seq(&self) -> SequenceNumber {
        self.first_seq
    }

    /// The sequence of the last operation.
    pub fn last_seq(&self) -> SequenceNumber {
        self.first_seq + self.ops.len() as u64 - 1
    }

    /// The operations, in order.
    pub fn ops(&self) -> &[ChangeOp] {
        &self.ops
    }

    /// The operations, owned.
    pub fn into_ops(self) -> Vec<ChangeOp> {
        self.ops
    }
}

/// A WAL a [`ChangeFeed`] reads: its number, the bytes of whole records
/// it may read, and the sequences it may hold.
#[derive(Debug, Clone, Copy)]
struct Source {
    number: u64,
    bytes: u64,
    first_seq: SequenceNumber,
    last_seq: SequenceNumber,
}

/// Committed write batches in sequence order, from [`crate::Db::changes_from`].
///
/// An iterator of [`ChangeGroup`]s (each `Result`: a WAL that fails its
/// checksums is [`Error::Corruption`], one deleted meanwhile because no
/// hold kept it is [`Error::ChangesReleased`]); it ends at the limit it was
/// made with, fixed when it was made. A tailing consumer asks for a new
/// feed from one past the last sequence it read. After an error it ends.
pub struct ChangeFeed {
    core: Arc<Core>,
    /// WALs not yet opened, oldest first.
    sources: VecDeque<Source>,
    /// The WAL being read.
    reader: Option<(PathBuf, LogReader)>,
    /// The lowest sequence to yield (operations below it in the first
    /// group are skipped).
    from: SequenceNumber,
    /// The highest sequence to yield.
    through: SequenceNumber,
    done: bool,
    /// The number of the WAL `reader` reads.
    reading: u64,
    /// Where to open the first source (set by [`ChangeFeed::next_feed`]).
    start_offset: Option<u64>,
    /// The WAL of the last group yielded and the offset just past its
    /// record: where [`ChangeFeed::next_feed`] resumes reading.
    resume_at: Option<(u64, u64)>,
    /// One past the last sequence yielded (`from` until one is).
    next_seq: SequenceNumber,
}

impl std::fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeFeed")
            .field("from", &self.from)
            .field("through", &self.through)
            .field("wals_left", &self.sources.len())
            .finish()
    }
}

impl ChangeFeed {
    /// The highest sequence this feed reads up to (its limit when made).
    pub fn limit_seq(&self) -> SequenceNumber {
        self.through
    }

    /// One past the last sequence this feed yielded (where it started, if
    /// it yielded nothing): where a tailing consumer reads on.
    pub fn next_seq(&self) -> SequenceNumber {
        self.next_seq
    }

    /// A feed of what follows this one, up to `limit` as it is now: from
    /// [`ChangeFeed::next_seq`] on, as [`crate::Db::changes_from`] would
    /// give, but reading the WAL this feed stopped in from the record
    /// after the last one it yielded, not from the WAL's start. A consumer
    /// tailing the active WAL thus reads each record once, where asking
    /// `changes_from` again would read the WAL's whole prefix each time.
    /// Call it once this feed has ended (it resumes after what was
    /// yielded, whatever was left unread).
    pub fn next_feed(&self, limit: FeedLimit) -> Result<ChangeFeed> {
        let mut feed = self.core.changes_from(self.next_seq, limit)?;
        if let Some((wal, offset)) = self.resume_at {
            if feed.sources.front().is_some_and(|s| s.number == wal) {
                feed.resume_at = Some((wal, offset));
                feed.start_offset = Some(offset);
            }
        }
        Ok(feed)
    }

    fn next_group(&mut self) -> Result<Option<ChangeGroup>> {
        loop {
            if self.reader.is_none() {
                let Some(source) = self.sources.pop_front() else {
                    return Ok(None);
                };
                if source.first_seq > self.through {
                    return Ok(None);
                }
                let path = crate::filename::wal_path(&self.core.dir, source.number);
                let opened = match self.start_offset.take() {
                    Some(at) => LogReader::open_prefix_at(&*self.core.fs, &path, source.bytes, at),
                    None => LogReader::open_prefix(&*self.core.fs, &path, source.bytes),
                };
                self.reading = source.number;
                let reader = match opened {
                    Ok(r) => r,
                    Err(Error::Io { source: e, .. })
                        if e.kind() == std::io::ErrorKind::NotFound =>
                    {
                        // Flushed and deleted since the feed was made: no
                        // hold kept it.
                        return Err(Error::ChangesReleased {
                            requested: self.from,
                            oldest: self.core.feed_oldest(),
                        });
                    }
                    Err(e) => return Err(e),
                };
                self.reader = Some((path, reader));
            }
            let Some((path, reader)) = self.reader.as_mut() else {
                continue;
            };
            let (offset, payload) = match reader.read()? {
                LogRead::Record { offset, payload } => (offset, payload),
                LogRead::End => {
                    self.reader = None;
                    continue;
                }
                // Within its limit every record is whole: the limit is
                // where the appender had stored whole records (or, after
                // a crash, where recovery stopped).
                LogRead::Bad { offset, reason, .. } => {
                    return Err(Error::corruption(path.clone(), offset, reason))
                }
            };
            if LogLink::decode(&payload).is_some() {
                continue;
            }
            let batch = WriteBatch::decode(payload).map_err(|r| {
                Error::corruption(path.clone(), offset, format!("bad write batch: {r}"))
            })?;
            let first = batch.sequence();
            if batch.is_empty() || first + batch.len() as u64 <= self.from {
                continue;
            }
            if first > self.through {
                // Records are in sequence order: nothing after this is
                // within the limit either.
                self.sources.clear();
                self.reader = None;
                return Ok(None);
            }
            self.resume_at = Some((self.reading, reader.offset()));
            self.next_seq = first + batch.len() as u64;
            let mut ops = Vec::with_capacity(batch.len());
            for (i, op) in batch.iter().enumerate() {
                let op = op.map_err(|e| Error::corruption(path.clone(), offset, e.to_string()))?;
                if first + (i as u64) < self.from {
                    continue;
                }
                ops.push(match (op.range_end, op.kind) {
                    (Some(end), _) => ChangeOp::DeleteRange {
                        start: op.key.to_vec(),
                        end: end.to_vec(),
                    },
                    (None, ValueKind::Delete) => ChangeOp::Delete {
                        key: op.key.to_vec(),
                    },
                    _ => ChangeOp::Put {
                        key: op.key.to_vec(),
                        value: (op.decoded_value())
                            .map_err(|r| Error::corruption(path.clone(), offset, r))?
                            .into_owned(),
                    },
                });
            }
            return Ok(Some(ChangeGroup {
                first_seq: first.max(self.from),
                ops,
            }));
        }
    }
}

impl Iterator for ChangeFeed {
    type Item = Result<ChangeGroup>;

    fn next(&mut self) -> Option<Result<ChangeGroup>> {
        if self.done {
            return None;
        }
        let r = self.next_group().transpose();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}

/// The first sequence of the oldest of `sources`.
fn first_seq(st: &EngineState, sources: &[Source]) -> SequenceNumber {
    sources
        .first()
        .map_or(st.feed.active_first_seq, |s| s.first_seq)
}

/// Checks a hold's name: what the manifest can record.
fn check_hold_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_HOLD_NAME {
        return Err(Error::InvalidArgument(format!(
            "a hold's name must be 1 to {MAX_HOLD_NAME} bytes, not {}",
            name.len()
        )));
    }
    Ok(())
}

impl Core {
    /// The WALs that may hold sequences from `from` on, oldest first: the
    /// retained ones, the immutable memtables', the active one (its bytes
    /// handed to the OS). Called with the state lock held; takes the WAL
    /// lock (the order of §6).
    fn feed_sources(&self, st: &EngineState) -> Vec<Source> {
        let mut sources: Vec<Source> = (st.feed.retained.iter())
            .map(|(n, w)| Source {
                number: *n,
                bytes: w.size,
                first_seq: w.first_seq,
                last_seq: w.last_seq,
            })
            .collect();
        for imm in &st.imms {
            sources.push(Source {
                number: imm.wal_number,
                bytes: imm.wal_size,
                first_seq: imm.first_sequence,
                last_seq: imm.last_sequence,
            });
        }
        let active_bytes = self.wal.lock().writer.size_in_file();
        sources.push(Source {
            number: st.mem_wal,
            bytes: active_bytes,
            first_seq: st.feed.active_first_seq,
            last_seq: u64::MAX,
        });
        // Retained WALs are flushed ones, all older than the memtables'.
        debug_assert!(sources.windows(2).all(|w| w[0].number < w[1].number));
        sources
    }

    /// The lowest sequence the feed can serve from now.
    pub(crate) fn feed_oldest(&self) -> SequenceNumber {
        let st = self.state.lock();
        let sources = self.feed_sources(&st);
        st.feed.oldest(first_seq(&st, &sources))
    }

    /// The highest sequence known durable and visible.
    pub(crate) fn durable_visible(&self) -> SequenceNumber {
        self.durable_seq.load(Ordering::Acquire).min(self.visible())
    }

    /// [`crate::Db::changes_from`].
    pub(crate) fn changes_from(
        self: &Arc<Core>,
        seq: SequenceNumber,
        limit: FeedLimit,
    ) -> Result<ChangeFeed> {
        self.check_open()?;
        // The limit first: every record up to it is in the sources listed
        // after (a record is appended before its sequence is visible or
        // synced, and a WAL flushed meanwhile is retained or reported).
        let through = match limit {
            FeedLimit::Durable => self.durable_visible(),
            FeedLimit::Visible => self.visible(),
        };
        let st = self.state.lock();
        let sources = self.feed_sources(&st);
        let oldest = st.feed.oldest(first_seq(&st, &sources));
        drop(st);
        let from = seq.max(1);
        if from < oldest {
            return Err(Error::ChangesReleased {
                requested: seq,
                oldest,
            });
        }
        Ok(ChangeFeed {
            core: Arc::clone(self),
            sources: sources.into_iter().filter(|s| s.last_seq >= from).collect(),
            reader: None,
            from,
            through,
            done: false,
            reading: 0,
            start_offset: None,
            resume_at: None,
            next_seq: from,
        })
    }

    /// Appends an edit of the feed's own (a hold set or dropped, a release
    /// that frees WALs), in the order every job follows (§5.1): the
    /// manifest lock, then the state lock to make the edit; the append and
    /// its fdatasync with the state lock released; the change installed;
    /// then the WALs no persisted hold pins any more are deleted. `make`
    /// returns the edit, or `None` when there is nothing to write; it runs
    /// with both locks held, so what it checks still holds when the edit
    /// is installed. A failed append poisons the database (the manifest
    /// refuses appends from then on).
    fn commit_feed_edit(
        &self,
        make: impl FnOnce(&mut EngineState) -> Result<Option<VersionEdit>>,
    ) -> Result<()> {
        let mut manifest = self.manifest.lock();
        let mut st = self.state.lock();
        let Some(mut edit) = make(&mut st)? else {
            return Ok(());
        };
        let holds = st.feed.unpersisted();
        edit.holds.extend(holds.iter().cloned());
        let appended = parking_lot::MutexGuard::unlocked(&mut st, || manifest.append(&edit));
        match appended {
            Ok(n) => Counters::add(&self.counters.manifest_bytes, n),
            Err(e) => {
                drop(st);
                drop(manifest);
                self.poison(&e);
                return Err(e);
            }
        }
        st.feed.note_persisted(&holds);
        for name in &edit.dropped_holds {
            st.feed.persisted.remove(name);
        }
        let gone = self.prune_retained_wals(&mut st);
        drop(st);
        drop(manifest);
        self.remove_wals(gone);
        Ok(())
    }

    /// Forgets the retained WALs that no hold the manifest records pins any
    /// more (an edit that says so is durable), returning the paths of
    /// those to delete: the ones that are not also value logs (GC deletes
    /// those when it drops their last reference, §5.6). Called with the
    /// state lock held after every manifest edit.
    pub(crate) fn prune_retained_wals(&self, st: &mut EngineState) -> Vec<PathBuf> {
        let persisted = &st.feed.persisted;
        let unpinned: Vec<u64> = (st.feed.retained.iter())
            .filter(|(_, w)| !holds_pin(persisted.values(), w.last_seq))
            .map(|(n, _)| *n)
            .collect();
        let mut gone = Vec::new();
        for n in unpinned {
            st.feed.retained.remove(&n);
            if !st.version.value_logs.contains_key(&n) {
                gone.push(crate::filename::wal_path(&self.dir, n));
            }
        }
        gone
    }

    /// Deletes WALs the feed let go (a failure leaves an orphan that the
    /// next open removes).
    pub(crate) fn remove_wals(&self, paths: Vec<PathBuf>) {
        for path in paths {
            let _ = self.fs.remove_file(&path);
        }
    }

    /// [`crate::Db::hold_changes`].
    pub(crate) fn hold_changes(&self, name: &str, from_seq: SequenceNumber) -> Result<()> {
        check_hold_name(name)?;
        self.check_writable()?;
        self.commit_feed_edit(|st| {
            let next = self.visible() + 1;
            if from_seq > next {
                return Err(Error::InvalidArgument(format!(
                    "hold {name:?} from sequence {from_seq}: the next sequence written is {next}"
                )));
            }
            let from = from_seq.max(1);
            let sources = self.feed_sources(st);
            // Without this hold: its own old place must not count.
            let first = sources
                .first()
                .map_or(st.feed.active_first_seq, |s| s.first_seq);
            let oldest = (st.feed.holds.iter())
                .filter(|(n, _)| n.as_str() != name)
                .map(|(_, s)| *s)
                .fold(first, u64::min);
            if from < oldest {
                return Err(Error::ChangesReleased {
                    requested: from_seq,
                    oldest,
                });
            }
            st.feed.holds.insert(name.to_string(), from);
            Ok(Some(VersionEdit::default()))
        })
    }

    /// [`crate::Db::release_changes`].
    pub(crate) fn release_changes(&self, name: &str, through: SequenceNumber) -> Result<()> {
        check_hold_name(name)?;
        self.check_writable()?;
        let visible = self.visible();
        if through > visible {
            return Err(Error::InvalidArgument(format!(
                "release of hold {name:?} through sequence {through}: only {visible} is visible"
            )));
        }
        self.commit_feed_edit(|st| {
            let Some(seq) = st.feed.holds.get_mut(name) else {
                return Err(Error::InvalidArgument(format!("no hold named {name:?}")));
            };
            if through < *seq {
                return Ok(None);
            }
            *seq = through + 1;
            // Written now only if it frees a WAL; else with the next edit.
            let feed = &st.feed;
            let frees = (feed.retained.values()).any(|w| !feed.pins(w.last_seq));
            Ok(frees.then(VersionEdit::default))
        })
    }

    /// Writes the holds released since the last manifest edit, if any
    /// (at close).
    pub(crate) fn persist_holds(&self) -> Result<()> {
        self.commit_feed_edit(|st| {
            Ok((!st.feed.unpersisted().is_empty()).then(VersionEdit::default))
        })
    }

    /// [`crate::Db::drop_hold`].
    pub(crate) fn drop_hold(&self, name: &str) -> Result<()> {
        check_hold_name(name)?;
        self.check_writable()?;
        self.commit_feed_edit(|st| {
            if st.feed.holds.remove(name).is_none() {
                return Err(Error::InvalidArgument(format!("no hold named {name:?}")));
            }
            Ok(Some(VersionEdit {
                dropped_holds: vec![name.to_string()],
                ..Default::default()
            }))
        })
    }

    /// Each hold with the bytes of flushed WALs kept for it, and the bytes
    /// of all WALs kept for the feed, for [`crate::Stats`].
    pub(crate) fn feed_stats(&self) -> (Vec<crate::stats::FeedHoldStats>, u64) {
        let st = self.state.lock();
        let feed = &st.feed;
        let holds = (feed.holds.iter())
            .map(|(name, seq)| crate::stats::FeedHoldStats {
                name: name.clone(),
                sequence: *seq,
                retained_bytes: (feed.retained.values())
                    .filter(|w| w.last_seq >= *seq)
                    .map(|w| w.size)
                    .sum(),
            })
            .collect();
        (holds, feed.retained.values().map(|w| w.size).sum())
    }
}
