//! The server's data format version, checked at open (`docs/DESIGN.md` §3
//! and §1.9 "Format versions").
//!
//! The system record `s` ++ `format` holds the data format as a `u32be`.
//! A directory without it was written by format 0 (hashes without a
//! version, fields under `h`): it is upgraded in place, one hash at a
//! time, and the record is written last, durably. A newer format is
//! refused before anything is written. A crash mid-upgrade leaves some
//! hashes converted (their metadata already of format 1) and the others
//! still of format 0 (type tag 2); the next open finds no record and goes
//! on with the rest, so the upgrade can stop anywhere.
//!
//! The record is kept in database 0's system namespace and speaks for
//! every database: an upgrade walks each database's keyspace (format 0
//! knew only database 0, but an upgrade that stopped anywhere must not
//! depend on that), and a future format's upgrade does the same.

use weft::{prefix_successor, Db, Keyspace, WriteBatch, WriteOptions};

use super::{new_version, StoreError, StoreResult};
use crate::encoding::{self, Kind, Meta};

/// Fields moved per batch: a huge hash is moved in several batches under
/// a version no metadata names yet, and switched over by the last one.
const FIELDS_PER_BATCH: usize = 4096;

/// Reads the data format record: `None` for a directory without one.
fn recorded_format(db: &Db) -> StoreResult<Option<u32>> {
    let Some(v) = db.get(encoding::system_key(encoding::FORMAT_RECORD))? else {
        return Ok(None);
    };
    let b: [u8; 4] = v.as_slice().try_into().map_err(|_| {
        StoreError::Unsupported(format!(
            "the server's data format record is malformed ({} bytes)",
            v.len()
        ))
    })?;
    Ok(Some(u32::from_be_bytes(b)))
}

/// Checks the data format: format 1 opens as it is, format 0 (no record)
/// is upgraded, anything newer is refused with nothing written.
pub(super) fn check_and_upgrade(db: &Db, dbs: &[Keyspace]) -> StoreResult<()> {
    match recorded_format(db)? {
        Some(encoding::FORMAT_VERSION) => Ok(()),
        Some(v) if v > encoding::FORMAT_VERSION => Err(StoreError::Unsupported(format!(
            "this directory holds weft serve data format {v}; this build reads formats up to {}: \
             open it with a newer weft",
            encoding::FORMAT_VERSION
        ))),
        // 0 is never recorded (format 0 had no record); treat it as absent.
        Some(_) | None => upgrade_from_0(db, dbs),
    }
}

/// Format 0 → 1: every format-0 hash moves its fields under a fresh
/// version (namespace `f`) and gets versioned metadata, one atomic switch
/// per hash; strings and the expiry index are unchanged. Then the `h`
/// namespace is range-deleted (empty by then) and the format record
/// written, both in one synced batch.
fn upgrade_from_0(db: &Db, dbs: &[Keyspace]) -> StoreResult<()> {
    for ks in dbs {
        let mut legacy = Vec::new();
        for kv in ks.prefix([encoding::META])? {
            let (k, v) = kv?;
            if let Some((expire_at, _)) = encoding::decode_legacy_hash(&v) {
                legacy.push((k[1..].to_vec(), expire_at));
            }
        }
        for (key, expire_at) in &legacy {
            upgrade_hash(db, ks, key, *expire_at)?;
        }
    }
    let mut batch = WriteBatch::new();
    for ks in dbs {
        batch.delete_range_in(ks, [encoding::LEGACY_HASH], [encoding::LEGACY_HASH + 1]);
    }
    batch.put(
        encoding::system_key(encoding::FORMAT_RECORD),
        encoding::FORMAT_VERSION.to_be_bytes(),
    );
    // The hashes' batches may sit in the WAL buffer (`manual_wal_flush`):
    // the synced batch after them makes them durable with it.
    db.flush_wal()?;
    db.write(batch, &WriteOptions::new().sync(true))?;
    Ok(())
}

/// Moves one format-0 hash to format 1. The last batch writes the new
/// metadata and deletes the old fields, so the hash is never half moved
/// for a reader; a crash before it leaves the hash in format 0 and, for a
/// hash of several batches, new fields under a version nothing names,
/// which the next attempt's first batch deletes (every version of the
/// key under `f` is unreachable while its metadata is of format 0).
fn upgrade_hash(db: &Db, ks: &Keyspace, key: &[u8], expire_at: Option<u64>) -> StoreResult<()> {
    let version = new_version();
    let old_prefix = encoding::key_prefix(encoding::LEGACY_HASH, key);
    let new_any_version = encoding::key_prefix(encoding::HASH, key);
    let mut batch = WriteBatch::new();
    let mut old_keys = Vec::new();
    let mut count: u64 = 0;
    let mut multi = false;
    for kv in ks.prefix(&old_prefix)? {
        let (k, v) = kv?;
        if batch.len() >= FIELDS_PER_BATCH {
            if !multi {
                // Written first (sequence order): clears a crashed
                // attempt's fields, never this attempt's.
                let mut clear = WriteBatch::new();
                let end =
                    prefix_successor(&new_any_version).unwrap_or_else(|| vec![encoding::HASH + 1]);
                clear.delete_range_in(ks, &new_any_version, end);
                db.write(clear, &WriteOptions::new())?;
                multi = true;
            }
            db.write(std::mem::take(&mut batch), &WriteOptions::new())?;
            old_keys.clear();
        }
        let field = &k[old_prefix.len()..];
        batch.put_in(
            ks,
            encoding::element_key(encoding::HASH, key, version, field),
            v,
        );
        if old_keys.len() < super::RANGE_DELETE_ELEMENTS as usize {
            old_keys.push(k);
        }
        count += 1;
    }
    if multi || count >= super::RANGE_DELETE_ELEMENTS {
        let end = prefix_successor(&old_prefix).unwrap_or_else(|| vec![encoding::LEGACY_HASH + 1]);
        batch.delete_range_in(ks, &old_prefix, end);
    } else {
        for k in old_keys {
            batch.delete_in(ks, k);
        }
    }
    if count == 0 {
        // A hash without fields cannot be written by format 0; drop it
        // rather than keep an empty collection.
        batch.delete_in(ks, encoding::meta_key(key));
        if let Some(t) = expire_at {
            batch.delete_in(ks, encoding::expiry_key(t, key));
        }
    } else {
        let meta = Meta {
            expire_at,
            count,
            ..Meta::new_collection(Kind::Hash, version)
        };
        batch.put_in(ks, encoding::meta_key(key), meta.encode());
    }
    db.write(batch, &WriteOptions::new())?;
    Ok(())
}
