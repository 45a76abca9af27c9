//! Conflict checks of optimistic transactions (`db::transaction`): is any
//! key a transaction tracked written after its snapshot?
//!
//! A commit checks twice. First with no lock held
//! ([`Core::check_commit_unlocked`]), which fails most conflicts early and
//! reads the store if it must; then under the WAL lock, in the write path
//! ([`Core::check_commit_locked`], called by `db::write`'s `append` just
//! before it takes the batch's sequences), once every sequence handed out
//! so far is visible. Under that lock no write can take a sequence, and
//! every write that took one is in the memtables or the store, so the
//! check sees every write ordered before the commit, and none can come
//! between the check and the commit's own sequences: the commit is as if
//! the transaction had run at that instant (`docs/DESIGN.md` §4.12).
//!
//! The second check reads memtables only, as long as the store is the one
//! the first check cleared: a version of the store is immutable, so if it
//! held no version newer than the snapshot of any tracked key then, it
//! holds none now, and every later write is in a memtable of the pinned
//! super version (a flush that moves memtables into tables installs a new
//! version). A store cleared at the transaction's begin needs no lookups
//! at all: every table in it holds only writes that were visible before
//! the snapshot was taken (a flush waits for its memtable's writes to be
//! visible; merges only rewrite tables).

use std::sync::Arc;

use super::core::{Core, SuperVersion};
use super::Keyspace;
use crate::error::{Error, Result};
use crate::key::{SequenceNumber, MAX_SEQUENCE};
use crate::store::Version;

/// What a commit checks: that no key of `keys` has a version newer than
/// `snapshot`.
pub(crate) struct CommitCheck {
    /// Every key the transaction read for update or wrote, sorted and
    /// without repeats.
    pub keys: Vec<Vec<u8>>,
    /// The transaction's snapshot.
    pub snapshot: SequenceNumber,
    /// A store version known to hold no version newer than `snapshot` of
    /// any key in `keys`: while the pinned super version has this one, the
    /// locked check reads the memtables only.
    pub clean_store: Arc<Version>,
    /// The keyspaces (other than the default one) whose keys are among
    /// `keys`: the locked check fails if one was dropped. A drop marks its
    /// handles before it takes the WAL lock for its write, so a commit
    /// either sees the mark or takes its sequences before the drop's range
    /// delete, which then covers them: never a write into a dropped span.
    pub keyspaces: Vec<Keyspace>,
}

/// The locked check's outcome, when not a conflict.
pub(crate) enum CommitChecked {
    /// No tracked key changed: the caller takes its sequences now, under
    /// the same hold of the WAL lock.
    Clear,
    /// Sequences up to this one were handed out but are not all visible
    /// yet (their writers are inserting): the check would miss them. The
    /// caller waits with the WAL lock released, and checks again.
    Behind(SequenceNumber),
}

impl Core {
    /// The sequence of the newest version (put or delete) of `key` in the
    /// pinned `sv`, at any sequence: the memtables, newest first, then,
    /// if `in_store`, the store. `None` when there is none (or, without
    /// `in_store`, none in the memtables).
    ///
    /// The one place that answers "when was `key` last written": a range
    /// delete covering `key` counts as a version at its sequence, or
    /// transactions would miss conflicts with it. A value kept in a value
    /// log is not read: only its sequence matters.
    ///
    /// The newest version of a key is never unlinked by the memtables'
    /// read watermark (only older ones are), nor dropped by merges while a
    /// snapshot below it lives, unless the key is gone altogether: a
    /// tombstone dropped with every version under it, which reads as "no
    /// version" here and as "absent" at the snapshot too (see §4.12).
    pub(crate) fn newest_sequence(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        in_store: bool,
    ) -> Result<Option<SequenceNumber>> {
        // A range delete covering the key is a write to it (checked
        // whatever `in_store` says: a lookup in the fragments, no I/O).
        let ranged = sv.newest_range_delete(key);
        for m in std::iter::once(&sv.mem).chain(&sv.imms) {
            if let Some(found) = m.get(key, MAX_SEQUENCE) {
                return Ok(Some(found.seq.max(ranged.unwrap_or(0))));
            }
        }
        if !in_store {
            return Ok(ranged);
        }
        let found =
            sv.version
                .partition_for(key)
                .get(key, MAX_SEQUENCE, &self.reads, self.munks_on())?;
        Ok(found.map(|(seq, _, _)| seq).max(ranged))
    }

    /// `Err(Conflict)` naming the first of `keys` whose newest version in
    /// `sv` is past `snapshot`. The store is read unless `sv` has
    /// `clean_store`.
    fn first_conflict(
        &self,
        sv: &SuperVersion,
        keys: &[Vec<u8>],
        snapshot: SequenceNumber,
        clean_store: &Arc<Version>,
    ) -> Result<()> {
        let in_store = !Arc::ptr_eq(&sv.version, clean_store);
        for key in keys {
            if self
                .newest_sequence(sv, key, in_store)?
                .is_some_and(|seq| seq > snapshot)
            {
                // A stored key: the transaction names its keyspace
                // (`Transaction::commit`).
                return Err(Error::Conflict {
                    key: key.clone(),
                    keyspace: super::DEFAULT_KEYSPACE.to_string(),
                });
            }
        }
        Ok(())
    }

    /// The commit's first check, with no lock held, against the current
    /// super version (whatever writes are visible in it). `begin_store` is
    /// the store version pinned before the snapshot was taken. Returns the
    /// store version now known clean, for [`CommitCheck::clean_store`].
    pub(crate) fn check_commit_unlocked(
        &self,
        keys: &[Vec<u8>],
        snapshot: SequenceNumber,
        begin_store: &Arc<Version>,
    ) -> Result<Arc<Version>> {
        let sv = self.pin_super_version();
        self.first_conflict(&sv, keys, snapshot, begin_store)?;
        Ok(Arc::clone(&sv.version))
    }

    /// The commit's decisive check, called with the WAL lock held (no
    /// sequence can be handed out meanwhile). Checks only once every
    /// sequence handed out is visible; otherwise says how far to wait.
    pub(crate) fn check_commit_locked(&self, check: &CommitCheck) -> Result<CommitChecked> {
        // `last_seq` changes only under the WAL lock, which the caller holds.
        let handed_out = self.last_seq.load(std::sync::atomic::Ordering::Relaxed);
        if self.visible() < handed_out {
            return Ok(CommitChecked::Behind(handed_out));
        }
        // Pinned under the WAL lock: its active memtable is the WAL's, and
        // it holds every write up to `handed_out` (a rotation installs the
        // new super version before it releases the lock).
        for ks in &check.keyspaces {
            ks.check_live()?;
        }
        let sv = self.pin_super_version();
        self.first_conflict(&sv, &check.keys, check.snapshot, &check.clean_store)?;
        Ok(CommitChecked::Clear)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::fault::gates;
    use crate::{Db, Error, Options, WriteOptions};

    const LIMIT: Duration = Duration::from_secs(60);

    /// A plain write that lands after the commit's unlocked check and
    /// before its append is caught by the check under the WAL lock: the
    /// unlocked check alone would lose it.
    #[test]
    fn a_write_between_the_two_checks_is_a_conflict() {
        const POINT: &str = "commit.checked_unlocked";
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put("k", "0").unwrap();
        let gate = gates::close(POINT, dir.path());
        let commit = std::thread::scope(|s| {
            let committer = s.spawn(|| {
                let mut txn = db.transaction();
                txn.get_for_update("k").unwrap();
                txn.put("out", "x").unwrap();
                txn.commit()
            });
            assert!(gates::wait_reached(POINT, dir.path(), LIMIT));
            db.put("k", "1").unwrap();
            drop(gate);
            committer.join().unwrap()
        });
        assert!(
            matches!(&commit, Err(Error::Conflict { key, .. }) if key == b"k"),
            "{commit:?}"
        );
        assert_eq!(db.get("out").unwrap(), None);
    }

    /// A write that took its sequence but is not inserted yet is invisible
    /// to a lookup: the commit waits until it is, then finds the conflict.
    #[test]
    fn a_commit_waits_for_the_writes_in_flight() {
        const POINT: &str = "write.unlogged_appended";
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let mut txn = db.transaction();
        assert_eq!(txn.get_for_update("k").unwrap(), None);
        txn.put("out", "x").unwrap();
        let gate = gates::close(POINT, dir.path());
        let commit = std::thread::scope(|s| {
            // Holds its sequence, not yet in the memtable.
            let writer = s.spawn(|| db.put_opt("k", "1", &WriteOptions::new().disable_wal(true)));
            assert!(gates::wait_reached(POINT, dir.path(), LIMIT));
            let committer = s.spawn(|| txn.commit());
            std::thread::sleep(Duration::from_millis(100));
            assert!(!committer.is_finished(), "the commit did not wait");
            drop(gate);
            writer.join().unwrap().unwrap();
            committer.join().unwrap()
        });
        assert!(commit.unwrap_err().is_conflict());
        assert_eq!(db.get("out").unwrap(), None);
    }

    /// A keyspace dropped while a commit that wrote to it waits between
    /// its two checks: the check under the WAL lock sees the drop's mark
    /// and fails the commit as a dropped keyspace's, writing nothing
    /// (without it the drop's range delete would still make it a conflict,
    /// but a retry would then meet the dropped handle).
    #[test]
    fn a_keyspace_dropped_between_the_two_checks_fails_the_commit() {
        const POINT: &str = "commit.checked_unlocked";
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let (tmp, keep) = (db.keyspace("tmp").unwrap(), db.keyspace("keep").unwrap());
        let gate = gates::close(POINT, dir.path());
        let commit = std::thread::scope(|s| {
            let committer = s.spawn(|| {
                let mut txn = db.transaction();
                txn.put_in(&tmp, "k", "mine").unwrap();
                txn.put_in(&keep, "k", "mine").unwrap();
                txn.commit()
            });
            assert!(gates::wait_reached(POINT, dir.path(), LIMIT));
            db.drop_keyspace("tmp").unwrap();
            drop(gate);
            committer.join().unwrap()
        });
        assert!(
            matches!(&commit, Err(Error::InvalidArgument(m)) if m.contains("tmp")),
            "{commit:?}"
        );
        assert_eq!(keep.get("k").unwrap(), None);
    }
}
