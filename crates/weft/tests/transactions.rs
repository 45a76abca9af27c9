//! Optimistic transactions (`Db::transaction`, `docs/DESIGN.md` §4.12):
//! read-your-own-writes, conflicts with plain writes and with other
//! transactions, untracked reads, rollback; and a model test in which
//! threads move money between accounts with the retry helper while a plain
//! writer races them, checked against a replay of the change feed in
//! commit order (every committed transaction read exactly the values the
//! serial order gives it), in process and across kill -9 cycles.
//!
//! Knobs: `WEFT_SEED`, `WEFT_TXN_CRASH_CYCLES` (default 6).

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use weft::{
    ChangeOp, Db, Error, FeedLimit, MemtableKind, Options, TransactionOptions, WriteBatch,
    WriteOptions,
};

fn open(dir: &std::path::Path) -> Db {
    Db::open(dir, Options::default()).unwrap()
}

fn pairs(it: impl Iterator<Item = weft::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(String, String)> {
    it.map(|r| {
        let (k, v) = r.unwrap();
        (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
    })
    .collect()
}

fn s(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn reads_see_own_writes_merged_over_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for k in ["a", "b", "c", "d"] {
        db.put(k, "old").unwrap();
    }
    let mut txn = db.transaction();
    // Written after the snapshot: the transaction does not see it.
    db.put("a", "plain").unwrap();
    db.put("e", "plain").unwrap();
    txn.put("b", "mine").unwrap();
    txn.delete("c").unwrap();
    txn.put("bb", "mine").unwrap();
    txn.put("z", "mine").unwrap();
    txn.delete("never-existed").unwrap();
    assert_eq!(txn.get("a").unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(txn.get("b").unwrap().as_deref(), Some(&b"mine"[..]));
    assert_eq!(txn.get("c").unwrap(), None);
    assert_eq!(txn.get("e").unwrap(), None);
    assert_eq!(
        txn.get_for_update("bb").unwrap().as_deref(),
        Some(&b"mine"[..])
    );
    // A second write of a key replaces the first.
    txn.put("d", "first").unwrap();
    txn.put("d", "second").unwrap();
    assert_eq!(txn.get("d").unwrap().as_deref(), Some(&b"second"[..]));

    let all = s(&[
        ("a", "old"),
        ("b", "mine"),
        ("bb", "mine"),
        ("d", "second"),
        ("z", "mine"),
    ]);
    assert_eq!(pairs(txn.range::<&str, _>(..).unwrap()), all);
    assert_eq!(pairs(txn.range("b".."d").unwrap()), all[1..3].to_vec());
    assert_eq!(pairs(txn.range("b"..="d").unwrap()), all[1..4].to_vec());
    assert_eq!(pairs(txn.range("c"..).unwrap()), all[3..].to_vec());
    assert_eq!(pairs(txn.range("z".."a").unwrap()), vec![]);
    assert_eq!(pairs(txn.range("d".."d").unwrap()), vec![]);
    // Nothing is visible outside before the commit.
    assert_eq!(db.get("z").unwrap(), None);
    // "a" and "e" are not tracked (never read for update, never written).
    txn.commit().unwrap();
    assert_eq!(
        pairs(db.range::<&str, _>(..).unwrap()),
        s(&[
            ("a", "plain"),
            ("b", "mine"),
            ("bb", "mine"),
            ("d", "second"),
            ("e", "plain"),
            ("z", "mine"),
        ])
    );
}

#[test]
fn a_plain_write_after_begin_conflicts_with_a_tracked_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("read", "1").unwrap();
    db.put("written", "1").unwrap();
    // A key read for update, then overwritten by a plain put.
    let mut txn = db.transaction();
    txn.get_for_update("read").unwrap();
    txn.put("out", "x").unwrap();
    db.put("read", "2").unwrap();
    match txn.commit() {
        Err(Error::Conflict { key, .. }) => assert_eq!(key, b"read"),
        other => panic!("expected a conflict on \"read\", got {other:?}"),
    }
    assert_eq!(db.get("out").unwrap(), None, "a failed commit wrote");
    // A key only written by the transaction, deleted by a plain delete.
    let mut txn = db.transaction();
    txn.put("written", "mine").unwrap();
    db.delete("written").unwrap();
    let err = txn.commit().unwrap_err();
    assert!(matches!(&err, Error::Conflict { key, .. } if key == b"written"));
    assert!(err.to_string().contains("\"written\""), "{err}");
    assert_eq!(db.get("written").unwrap(), None);
    // A key absent at the snapshot, put and deleted since: still a
    // version newer than the snapshot.
    let mut txn = db.transaction();
    assert_eq!(txn.get_for_update("fresh").unwrap(), None);
    txn.put("out", "y").unwrap();
    db.put("fresh", "1").unwrap();
    db.delete("fresh").unwrap();
    assert!(txn.commit().unwrap_err().is_conflict());
}

/// The conflicting write moved into a table before the commit: the check
/// must find it in the store (the pinned store version changed).
/// A range delete covering a tracked key is a write to it: in the
/// memtable, flushed into the store, and once merges have applied it
/// (dropped, it left a point delete for the transaction's snapshot).
#[test]
fn a_range_delete_over_a_tracked_key_conflicts() {
    for stage in ["memtable", "flushed", "merged"] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.put("k5", "1").unwrap();
        db.put("other", "1").unwrap();
        let mut txn = db.transaction();
        txn.get_for_update("k5").unwrap();
        txn.put("out", "x").unwrap();
        db.delete_range("k0", "k9").unwrap();
        match stage {
            "flushed" => db.flush().unwrap(),
            "merged" => db.compact().unwrap(),
            _ => {}
        }
        match txn.commit() {
            Err(Error::Conflict { key, .. }) => assert_eq!(key, b"k5", "{stage}"),
            other => panic!("{stage}: expected a conflict on \"k5\", got {other:?}"),
        }
        assert_eq!(
            db.get("out").unwrap(),
            None,
            "{stage}: a failed commit wrote"
        );
        // A range delete elsewhere is no conflict.
        let mut txn = db.transaction();
        txn.get_for_update("other").unwrap();
        txn.put("out", "y").unwrap();
        db.delete_range("p", "q").unwrap();
        txn.commit().unwrap();
    }
}

#[test]
fn a_conflicting_write_flushed_to_a_table_is_still_found() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("k", "1").unwrap();
    db.put("other", "1").unwrap();
    db.flush().unwrap();
    let mut txn = db.transaction();
    txn.get_for_update("k").unwrap();
    txn.put("out", "x").unwrap();
    db.put("k", "2").unwrap();
    db.flush().unwrap();
    assert!(txn.commit().unwrap_err().is_conflict());
    // And a flush with no conflicting write in it is no conflict.
    let mut txn = db.transaction();
    txn.get_for_update("k").unwrap();
    txn.put("out", "x").unwrap();
    db.put("other", "2").unwrap();
    db.flush().unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get("out").unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn another_transaction_commit_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("n", "0").unwrap();
    let mut t1 = db.transaction();
    let mut t2 = db.transaction();
    assert_eq!(t1.get_for_update("n").unwrap().as_deref(), Some(&b"0"[..]));
    assert_eq!(t2.get_for_update("n").unwrap().as_deref(), Some(&b"0"[..]));
    t1.put("n", "1").unwrap();
    t2.put("n", "1").unwrap();
    t1.commit().unwrap();
    // t2 read "0" too: committing would lose t1's increment.
    assert!(t2.commit().unwrap_err().is_conflict());
    assert_eq!(db.get("n").unwrap().as_deref(), Some(&b"1"[..]));
    // Two transactions writing one key blindly conflict as well.
    let mut t1 = db.transaction();
    let mut t2 = db.transaction();
    t1.put("blind", "1").unwrap();
    t2.put("blind", "2").unwrap();
    t2.commit().unwrap();
    assert!(t1.commit().unwrap_err().is_conflict());
    assert_eq!(db.get("blind").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn untracked_keys_do_not_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for k in ["a", "b", "c"] {
        db.put(k, "0").unwrap();
    }
    let mut txn = db.transaction();
    assert_eq!(txn.get("a").unwrap().as_deref(), Some(&b"0"[..]));
    assert_eq!(pairs(txn.range::<&str, _>(..).unwrap()).len(), 3);
    txn.get_for_update("b").unwrap();
    txn.put("c", "1").unwrap();
    // Plain reads and range reads are not tracked (snapshot isolation).
    db.put("a", "changed").unwrap();
    db.put("bb", "phantom").unwrap();
    // Neither is a key nobody in the transaction touched.
    db.put("unrelated", "x").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get("c").unwrap().as_deref(), Some(&b"1"[..]));
    // A transaction that writes nothing commits whatever changed.
    let mut ro = db.transaction();
    ro.get_for_update("c").unwrap();
    db.put("c", "2").unwrap();
    ro.commit().unwrap();
    // Disjoint write sets of concurrent transactions both commit.
    let mut t1 = db.transaction();
    let mut t2 = db.transaction();
    t1.put("x", "1").unwrap();
    t2.put("y", "2").unwrap();
    t1.commit().unwrap();
    t2.commit().unwrap();
    assert_eq!(db.get("y").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn rollback_and_drop_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("k", "kept").unwrap();
    let mut txn = db.transaction();
    txn.put("k", "rolled back").unwrap();
    txn.put("new", "rolled back").unwrap();
    txn.rollback();
    {
        let mut txn = db.transaction();
        txn.delete("k").unwrap();
        txn.put("dropped", "x").unwrap();
    }
    // A body that fails: the retry helper returns its error, commits nothing.
    let r: weft::Result<()> = db.transact(|txn| {
        txn.put("failed", "x")?;
        Err(Error::InvalidArgument("the body gives up".into()))
    });
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
    // A transaction whose commit fails on a bad key writes nothing.
    let mut txn = db.transaction();
    assert!(txn.put(vec![0u8; weft::MAX_KEY_SIZE + 1], "v").is_err());
    drop(txn);
    let want = s(&[("k", "kept")]);
    assert_eq!(pairs(db.range::<&str, _>(..).unwrap()), want);
    db.close().unwrap();
    let db = open(dir.path());
    assert_eq!(pairs(db.range::<&str, _>(..).unwrap()), want);
}

#[test]
fn transact_retries_conflicts_up_to_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    // A body that always meets a conflicting plain write.
    let mut runs = 0;
    let opts = TransactionOptions::new().max_attempts(3);
    let r = db.transact_opt(&opts, |txn| {
        runs += 1;
        txn.get_for_update("k")?;
        txn.put("k", "mine")?;
        db.put("k", format!("plain {runs}"))?;
        Ok(())
    });
    assert!(r.unwrap_err().is_conflict());
    assert_eq!(runs, 3);
    // One that conflicts once, then succeeds.
    let mut runs = 0;
    let value = db
        .transact(|txn| {
            runs += 1;
            txn.get_for_update("k")?;
            txn.put("k", "mine")?;
            if runs == 1 {
                db.put("k", "racing")?;
            }
            Ok(runs * 10)
        })
        .unwrap();
    assert_eq!((runs, value), (2, 20));
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"mine"[..]));
}

// -------------------------------------------------------- keyspaces ----

/// The same user key in the default keyspace and two others: each read
/// sees its own keyspace's pending write and snapshot value, ranges merge
/// only their keyspace's writes, and the default keyspace's reads never
/// see the others' pending writes under the reserved prefix.
#[test]
fn keyspace_reads_see_their_own_keyspace_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    db.put("k", "default-old").unwrap();
    a.put("k", "a-old").unwrap();
    a.put("m", "a-old").unwrap();
    b.put("z", "b-old").unwrap();
    let mut txn = db.transaction();
    // After the snapshot: unseen.
    a.put("late", "x").unwrap();
    txn.put_in(&a, "k", "a-new").unwrap();
    txn.delete_in(&a, "m").unwrap();
    txn.put_in(&b, "k", "b-new").unwrap();
    txn.put("n", "default-new").unwrap();
    assert_eq!(txn.get("k").unwrap().as_deref(), Some(&b"default-old"[..]));
    assert_eq!(txn.get_in(&a, "k").unwrap().as_deref(), Some(&b"a-new"[..]));
    assert_eq!(txn.get_in(&b, "k").unwrap().as_deref(), Some(&b"b-new"[..]));
    assert_eq!(txn.get_in(&a, "m").unwrap(), None);
    assert_eq!(txn.get_in(&b, "n").unwrap(), None);
    // The default handle is the plain API.
    let default = db.keyspace("default").unwrap();
    assert_eq!(
        txn.get_in(&default, "n").unwrap().as_deref(),
        Some(&b"default-new"[..])
    );
    assert_eq!(
        pairs(txn.range_in::<&str, _>(&a, ..).unwrap()),
        s(&[("k", "a-new")])
    );
    assert_eq!(
        pairs(txn.range_in(&b, "a".."zz").unwrap()),
        s(&[("k", "b-new"), ("z", "b-old")])
    );
    assert_eq!(
        pairs(txn.range_in(&b, "l"..).unwrap()),
        s(&[("z", "b-old")])
    );
    assert_eq!(
        pairs(txn.range::<&[u8], _>(..).unwrap()),
        s(&[("k", "default-old"), ("n", "default-new")])
    );
    // The default keyspace's view of another keyspace's stored key: a
    // miss, though the transaction holds a pending write there.
    let mut stored = b"\xffWKS".to_vec();
    stored.extend_from_slice(&1u32.to_be_bytes());
    stored.extend_from_slice(b"k");
    assert_eq!(txn.get(&stored).unwrap(), None);
    assert_eq!(txn.get_for_update(&stored).unwrap(), None);
    assert!(matches!(
        txn.put(&stored, "x"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        txn.delete(&stored),
        Err(Error::InvalidArgument(_))
    ));
    txn.commit().unwrap();
    assert_eq!(a.get("k").unwrap().as_deref(), Some(&b"a-new"[..]));
    assert_eq!(a.get("m").unwrap(), None);
    assert_eq!(b.get("k").unwrap().as_deref(), Some(&b"b-new"[..]));
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"default-old"[..]));
    assert_eq!(db.get("n").unwrap().as_deref(), Some(&b"default-new"[..]));
}

/// A write in one keyspace never conflicts with the same user key tracked
/// in another; one in the same keyspace does, and the conflict names the
/// key within its keyspace and the keyspace.
#[test]
fn keyspace_conflicts_are_per_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    let mut txn = db.transaction();
    txn.get_for_update_in(&a, "read").unwrap();
    txn.put_in(&a, "written", "mine").unwrap();
    // The same user keys, elsewhere.
    b.put("read", "x").unwrap();
    b.put("written", "x").unwrap();
    db.put("read", "x").unwrap();
    db.put("written", "x").unwrap();
    txn.commit().unwrap();
    assert_eq!(a.get("written").unwrap().as_deref(), Some(&b"mine"[..]));

    for (tracked, by) in [("read", "a put"), ("written", "a delete")] {
        let mut txn = db.transaction();
        txn.get_for_update_in(&a, "read").unwrap();
        txn.put_in(&a, "written", "again").unwrap();
        txn.put_in(&b, "other", "never").unwrap();
        if by == "a put" {
            a.put(tracked, "theirs").unwrap();
        } else {
            a.delete(tracked).unwrap();
        }
        let err = txn.commit().unwrap_err();
        match &err {
            Error::Conflict { key, keyspace } => {
                assert_eq!(
                    (key.as_slice(), keyspace.as_str()),
                    (tracked.as_bytes(), "a")
                )
            }
            other => panic!("expected a conflict on a/{tracked}, got {other:?}"),
        }
        assert!(err.to_string().contains("of keyspace \"a\""), "{err}");
        assert_eq!(b.get("other").unwrap(), None, "a failed commit wrote");
    }
    // A range delete in the keyspace over a tracked key conflicts too.
    let mut txn = db.transaction();
    txn.put_in(&a, "written", "again").unwrap();
    a.delete_range("w", "x").unwrap();
    assert!(txn.commit().unwrap_err().is_conflict());
    // A default-keyspace conflict still names "default".
    let mut txn = db.transaction();
    txn.put("written", "mine").unwrap();
    db.put("written", "theirs").unwrap();
    match txn.commit() {
        Err(Error::Conflict { key, keyspace }) => {
            assert_eq!(
                (key.as_slice(), keyspace.as_str()),
                (&b"written"[..], "default")
            )
        }
        other => panic!("{other:?}"),
    }
}

/// A committed transaction is one batch across keyspaces (it survives a
/// reopen whole); a rolled-back one leaves nothing anywhere.
#[test]
fn keyspace_commits_are_atomic_and_rollbacks_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    let mut txn = db.transaction();
    txn.put_in(&a, "x", "1").unwrap();
    txn.put_in(&b, "y", "2").unwrap();
    txn.put("z", "3").unwrap();
    txn.rollback();
    let mut txn = db.transaction();
    txn.put_in(&a, "gone", "1").unwrap();
    drop(txn);
    assert!(a.range::<&str, _>(..).unwrap().next().is_none());
    assert!(b.range::<&str, _>(..).unwrap().next().is_none());
    assert!(db.range::<&str, _>(..).unwrap().next().is_none());

    let feed_from = db.snapshot().sequence() + 1;
    db.transact(|txn| {
        txn.put_in(&a, "x", "1")?;
        txn.put_in(&b, "y", "2")?;
        txn.put("z", "3")
    })
    .unwrap();
    // One group in the change feed: one batch.
    let feed = db.changes_from(feed_from, FeedLimit::Visible).unwrap();
    let groups: Vec<_> = feed.map(|g| g.unwrap()).collect();
    assert_eq!(groups.len(), 1, "the commit was not one batch");
    assert_eq!(groups[0].ops().len(), 3);
    // Handles keep the database open, as clones of it do.
    drop((a, b, db));
    let db = open(dir.path());
    let (a, b) = (db.keyspace("a").unwrap(), db.keyspace("b").unwrap());
    assert_eq!(a.get("x").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(b.get("y").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get("z").unwrap().as_deref(), Some(&b"3"[..]));
}

/// A dropped keyspace's handle fails every transaction call, and a
/// transaction that wrote to a keyspace dropped before its commit writes
/// nothing anywhere, even under the name created again.
#[test]
fn a_dropped_keyspace_fails_transactions_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let (tmp, keep) = (db.keyspace("tmp").unwrap(), db.keyspace("keep").unwrap());
    tmp.put("k", "v").unwrap();
    let mut txn = db.transaction();
    txn.put_in(&tmp, "k", "mine").unwrap();
    txn.put_in(&keep, "k", "mine").unwrap();
    txn.put("k", "mine").unwrap();
    db.drop_keyspace("tmp").unwrap();
    assert!(matches!(
        txn.get_in(&tmp, "k"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        txn.get_for_update_in(&tmp, "k"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        txn.put_in(&tmp, "k", "v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        txn.delete_in(&tmp, "k"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        txn.range_in::<&str, _>(&tmp, ..),
        Err(Error::InvalidArgument(_))
    ));
    let err = txn.commit().unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("tmp")),
        "{err:?}"
    );
    assert_eq!(keep.get("k").unwrap(), None);
    assert_eq!(db.get("k").unwrap(), None);
    let again = db.keyspace("tmp").unwrap();
    assert_eq!(again.get("k").unwrap(), None);
    // The retry helper returns the error at once: it is no conflict.
    let mut runs = 0;
    let r = db.transact(|txn| {
        runs += 1;
        txn.put_in(&tmp, "k", "v")
    });
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
    assert_eq!(runs, 1);
    // The new keyspace works in transactions.
    db.transact(|txn| txn.put_in(&again, "k", "new")).unwrap();
    assert_eq!(again.get("k").unwrap().as_deref(), Some(&b"new"[..]));
}

// --------------------------------------------------------------- model ----

const ACCOUNTS: usize = 8;
const INITIAL: u64 = 1000;

fn account(i: usize) -> Vec<u8> {
    format!("acct/{i:02}").into_bytes()
}

fn number(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

/// Creates the accounts (one batch) unless they exist.
fn create_accounts(db: &Db) {
    if db.get(account(0)).unwrap().is_some() {
        return;
    }
    let mut b = WriteBatch::new();
    for i in 0..ACCOUNTS {
        b.put(account(i), INITIAL.to_string());
    }
    db.write(b, &WriteOptions::new().sync(true)).unwrap();
}

/// One transfer in a transaction, retried on conflict: reads two or three
/// accounts and the plain writer's `epoch` for update, moves amounts
/// between them, and writes a log record `log/<tag>` of every value it
/// read (checked against the commit-order replay). One body in 16 writes
/// an `aborted/` key and fails: nothing of it may ever show.
fn transfer(db: &Db, rng: &mut StdRng, tag: &str, sync: bool) -> weft::Result<bool> {
    let n = rng.gen_range(2..=3);
    let mut picked: Vec<usize> = Vec::new();
    while picked.len() < n {
        let a = rng.gen_range(0..ACCOUNTS);
        if !picked.contains(&a) {
            picked.push(a);
        }
    }
    let abort = rng.gen_ratio(1, 16);
    let amounts: Vec<u64> = (0..n).map(|_| rng.gen_range(0..=50)).collect();
    let opts = TransactionOptions::new()
        .max_attempts(100_000)
        .write_options(WriteOptions::new().sync(sync));
    let r = db.transact_opt(&opts, |txn| {
        let mut log = String::new();
        let epoch = txn.get_for_update("epoch")?.unwrap_or_default();
        log.push_str(&format!("epoch={}", String::from_utf8_lossy(&epoch)));
        let mut balances = Vec::new();
        for &a in &picked {
            let v = txn.get_for_update(account(a))?.unwrap();
            log.push_str(&format!(
                ";{}={}",
                String::from_utf8_lossy(&account(a)),
                number(&v)
            ));
            balances.push(number(&v));
        }
        // Each picked account pays its amount (if it can) to the next one.
        for i in 0..n {
            let pay = amounts[i].min(balances[i]);
            balances[i] -= pay;
            balances[(i + 1) % n] += pay;
        }
        for (i, &a) in picked.iter().enumerate() {
            txn.put(account(a), balances[i].to_string())?;
        }
        txn.put(format!("log/{tag}"), log)?;
        if abort {
            txn.put(format!("aborted/{tag}"), "x")?;
            return Err(Error::InvalidArgument("aborted on purpose".into()));
        }
        Ok(())
    });
    match r {
        Ok(()) => Ok(true),
        Err(Error::InvalidArgument(_)) if abort => Ok(false),
        Err(e) => Err(e),
    }
}

/// The sum of the accounts, and no aborted transaction's key anywhere.
fn check_state(db: &Db, ctx: &str) {
    let sum: u64 = (0..ACCOUNTS)
        .map(|i| number(&db.get(account(i)).unwrap().unwrap()))
        .sum();
    assert_eq!(
        sum,
        ACCOUNTS as u64 * INITIAL,
        "{ctx}: the sum is not conserved"
    );
    let aborted: Vec<_> = db.prefix("aborted/").unwrap().collect();
    assert!(aborted.is_empty(), "{ctx}: an aborted transaction wrote");
}

/// Replays the change feed in commit order into a model, checking that
/// every transaction's log names exactly the values its keys had just
/// before it in that order (so the commits are serializable in commit
/// order, and none lost an update), and that the database equals the
/// model. Returns the transactions replayed.
fn check_commit_order(db: &Db, ctx: &str) -> usize {
    let mut model: Model = BTreeMap::new();
    let mut txns = 0;
    for group in db.changes_from(1, FeedLimit::Visible).unwrap() {
        let group = group.unwrap();
        for op in group.ops() {
            if let ChangeOp::Put { key, value } = op {
                if key.starts_with(b"log/") {
                    txns += 1;
                    for read in String::from_utf8(value.clone()).unwrap().split(';') {
                        let (k, v) = read.split_once('=').unwrap();
                        let now = model.get(k.as_bytes()).map(|v| String::from_utf8_lossy(v));
                        assert_eq!(
                            now.as_deref().unwrap_or(""),
                            v,
                            "{ctx}: transaction {} read {k}={v}, but in commit order {k} was \
                             {now:?} (batch at sequence {})",
                            String::from_utf8_lossy(key),
                            group.first_seq()
                        );
                    }
                }
            }
        }
        for op in group.ops() {
            match op {
                ChangeOp::Put { key, value } => {
                    model.insert(key.clone(), value.clone());
                }
                ChangeOp::Delete { key } => {
                    model.remove(key);
                }
                ChangeOp::DeleteRange { start, end } => {
                    model.retain(|k, _| k < start || k >= end);
                }
            }
        }
    }
    assert_db_eq(
        db,
        &model,
        &format!("{ctx}: database against the feed's replay"),
    );
    txns
}

/// Runs `threads` transferring threads (`per_thread` transfers each)
/// while one plain writer keeps overwriting `epoch`, which every transfer
/// reads for update. Returns the transfers committed.
fn run_transfers(db: &Db, seed: u64, tag: &str, threads: usize, per_thread: usize) -> u64 {
    let done = AtomicBool::new(false);
    let committed = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !done.load(Ordering::Relaxed) {
                db.put("epoch", i.to_string()).unwrap();
                db.put(format!("noise/{}", i % 64), "x").unwrap();
                i += 1;
                // Often enough to land inside many transactions, not so
                // often that a transfer never finds a window to commit.
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        // Stops the plain writer however the workers end (a failed
        // assertion in one must fail the test, not hang the scope).
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&done);
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let committed = &committed;
                s.spawn(move || {
                    let mut rng = rng(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9));
                    for i in 0..per_thread {
                        let sync = rng.gen_ratio(1, 32);
                        if transfer(db, &mut rng, &format!("{tag}/{t}/{i:05}"), sync).unwrap() {
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    });
    committed.load(Ordering::Relaxed)
}

#[test]
fn concurrent_transfers_are_serializable_and_conserve_the_sum() {
    for seed in seeds(&[0x7A5E_0001]) {
        let _guard = SeedGuard::new(format!(
            "transfers seed={seed}; replay with WEFT_SEED={seed}"
        ));
        for kind in [MemtableKind::default(), MemtableKind::SkipList] {
            let dir = tempfile::tempdir().unwrap();
            // Small memtables: flushes (and so store lookups in the
            // conflict check) happen during the run.
            let opts = || {
                Options::default()
                    .memtable(kind)
                    .write_buffer_size(64 << 10)
            };
            let db = Db::open(dir.path(), opts()).unwrap();
            db.hold_changes("check", 1).unwrap();
            create_accounts(&db);
            let committed = run_transfers(&db, seed, "a", 4, 300);
            let ctx = format!("kind {kind}");
            check_state(&db, &ctx);
            assert_eq!(check_commit_order(&db, &ctx) as u64, committed, "{ctx}");
            // Again after a reopen, and with more transfers on top.
            db.close().unwrap();
            let db = Db::open(dir.path(), opts()).unwrap();
            check_state(&db, &format!("{ctx}, reopened"));
            let more = run_transfers(&db, seed ^ 1, "b", 3, 100);
            check_state(&db, &format!("{ctx}, reopened and written"));
            assert_eq!(
                check_commit_order(&db, &format!("{ctx}, reopened and written")) as u64,
                committed + more
            );
        }
    }
}

// ---------------------------------------------------------- kill -9 ----

/// The child of [`transfers_survive_kill_cycles`]: transfers on three
/// threads until killed. Does nothing in a normal test run.
#[test]
fn child_transferrer() {
    let Ok(dir) = std::env::var("WEFT_TXN_DIR") else {
        return;
    };
    let seed: u64 = std::env::var("WEFT_TXN_SEED").unwrap().parse().unwrap();
    let cycle = std::env::var("WEFT_TXN_CYCLE").unwrap();
    let db = Db::open(&dir, tiny_options(MemtableKind::default())).expect("child: open");
    db.hold_changes("check", 1).unwrap();
    create_accounts(&db);
    let mut out = std::io::stdout();
    writeln!(out, "\nready").unwrap();
    out.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    std::thread::scope(|s| {
        for t in 0..3 {
            let (db, cycle) = (&db, &cycle);
            s.spawn(move || {
                let mut rng = rng(seed ^ ((t + 1) * 7919));
                let mut i = 0;
                while Instant::now() < deadline {
                    let sync = rng.gen_ratio(1, 8);
                    transfer(db, &mut rng, &format!("{cycle}/{t}/{i:06}"), sync).unwrap();
                    i += 1;
                }
            });
        }
    });
    eprintln!("child_transferrer: parent never killed us; exiting");
}

/// Transfers across kill -9 of the process: after every recovery the sum
/// is conserved, no aborted transaction shows, and the feed's replay in
/// commit order matches every committed transaction's reads and the
/// database (a torn transaction would break all three).
#[test]
fn transfers_survive_kill_cycles() {
    let cycles = env_usize("WEFT_TXN_CRASH_CYCLES", 6);
    for seed in seeds(&[0x7A5E_0002]) {
        let _guard = SeedGuard::new(format!("txn kill cycles seed={seed}; WEFT_SEED={seed}"));
        let dir = tempfile::tempdir().unwrap();
        let logs = tempfile::tempdir().unwrap();
        let mut rng = rng(seed);
        let mut replayed = 0;
        for cycle in 0..cycles {
            let stderr_path = logs.path().join(format!("child-{cycle}.stderr"));
            let (mut child, rx, reader) = spawn_child(
                "child_transferrer",
                &[
                    ("WEFT_TXN_DIR", dir.path().display().to_string()),
                    ("WEFT_TXN_SEED", (seed ^ cycle as u64).to_string()),
                    ("WEFT_TXN_CYCLE", cycle.to_string()),
                ],
                &stderr_path,
            );
            let mut lines = Vec::new();
            assert!(
                wait_for_line(&rx, "ready", Duration::from_secs(60), &mut lines),
                "cycle {cycle}: child never became ready\n{}",
                child_stderr(&stderr_path)
            );
            std::thread::sleep(Duration::from_millis(rng.gen_range(50..=400)));
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "cycle {cycle}: child exited ({status})\n{}",
                    child_stderr(&stderr_path)
                );
            }
            child.kill().unwrap();
            child.wait().unwrap();
            reader.join().unwrap();
            let db = Db::open(dir.path(), tiny_options(MemtableKind::default())).unwrap();
            let ctx = format!("cycle {cycle} after kill -9");
            check_state(&db, &ctx);
            let txns = check_commit_order(&db, &ctx);
            assert!(
                txns >= replayed,
                "{ctx}: committed transactions went missing"
            );
            replayed = txns;
            drop(db);
        }
        assert!(replayed > 0, "no transaction ever committed before a kill");
        eprintln!("txn kill cycles seed={seed}: {cycles} kills, {replayed} transactions");
    }
}
