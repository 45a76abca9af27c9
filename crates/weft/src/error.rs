//! The one error type of the engine.
//!
//! Every fallible call of the public API returns [`Result<T>`]. The variants are
//! precise on purpose (as redb's are): a caller can tell a full disk from a
//! flipped bit from a misuse of the API, and each message says what and where.

use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Weft.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed. `context` names the operation and
    /// the file involved.
    #[error("I/O error while {context}: {source}")]
    Io {
        /// What Weft was doing, e.g. `"writing WAL 000012.log"`.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Bytes on disk failed verification (checksum, magic, framing, or a
    /// structural invariant). Weft never returns data from a corrupted region.
    #[error("corruption in {} at offset {offset}: {reason}", file.display())]
    Corruption {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// Byte offset of the bad region within `file`.
        offset: u64,
        /// What check failed.
        reason: String,
    },

    /// The caller passed something Weft does not accept (oversized key or
    /// value, an option out of range, ...). Nothing was written.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A write or fsync on the WAL, the manifest, or a background flush failed
    /// earlier; the database no longer accepts writes (reads keep working).
    /// Reopen the database to recover.
    #[error("database is poisoned by an earlier write failure: {0}")]
    Poisoned(String),

    /// Another process (or another `Db` in this process) holds the directory.
    #[error("database directory {} is locked by another process", path.display())]
    Locked {
        /// The LOCK file that could not be acquired.
        path: PathBuf,
    },

    /// The directory was written in a store format newer than this build
    /// reads (`docs/DESIGN.md` §3). Nothing was read past the version or
    /// written.
    #[error(
        "{} records store format version {found}; this build of Weft reads versions up to \
         {supported}: open the database with a newer Weft",
        path.display()
    )]
    Unsupported {
        /// The manifest that records the version.
        path: PathBuf,
        /// The version found.
        found: u64,
        /// The highest version this build reads.
        supported: u64,
    },

    /// The change feed no longer holds the sequence asked for: every batch
    /// below `oldest` may have been released (no hold kept the WAL that
    /// logged it). `Db::changes_from` and `Db::hold_changes` return it; a
    /// consumer that must not miss a batch holds its place with a hold
    /// (`docs/DESIGN.md` §1.5.1).
    #[error(
        "the change feed no longer holds sequence {requested}: the oldest it can serve is \
         {oldest} (batches before it were released; a hold keeps them)"
    )]
    ChangesReleased {
        /// The sequence asked for.
        requested: u64,
        /// The lowest sequence the feed can serve from.
        oldest: u64,
    },

    /// The database was closed; no further operations are possible.
    #[error("database is closed")]
    Closed,

    /// The database was opened with [`crate::Db::open_read_only`], which
    /// never writes to its directory (another process may be writing it):
    /// `operation` (a put, a flush, a checkpoint, ...) was refused and
    /// nothing changed. Open it with [`crate::Db::open`] to write.
    #[error("database is open read-only: {operation} refused")]
    ReadOnly {
        /// What was refused, e.g. `"write"` or `"flush"`.
        operation: &'static str,
    },

    /// A transaction's commit found that `key`, which it read for update
    /// or wrote, has a version (a put or a delete) newer than the
    /// transaction's snapshot: another write got there first, and
    /// committing would lose it or act on a stale read. Nothing of the
    /// transaction was written. Run the transaction again from the start
    /// (`Db::transact` does, up to a bound); see `docs/DESIGN.md` §4.12.
    #[error(
        "transaction conflict: key \"{}\"{} was written after the transaction's snapshot; \
         nothing was committed, retry the transaction",
        key.escape_ascii(),
        keyspace_words(keyspace)
    )]
    Conflict {
        /// The first tracked key found changed, as the transaction named
        /// it: the key within its keyspace (bytes; the message escapes it
        /// for printing).
        key: Vec<u8>,
        /// The name of the key's keyspace (`"default"` for the plain
        /// [`crate::Db`] keys; see `Transaction::put_in`).
        keyspace: String,
    },
}

impl Error {
    /// Builds an [`Error::Io`] with a context message.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Builds an [`Error::Corruption`].
    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// True for [`Error::Conflict`]: a transaction lost a race and may be
    /// retried.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
    /// let mut txn = db.transaction();
    /// txn.put("k", "mine").unwrap();
    /// db.put("k", "theirs").unwrap();
    /// let err = txn.commit().unwrap_err();
    /// assert!(err.is_conflict());
    /// assert_eq!(
    ///     err.to_string(),
    ///     "transaction conflict: key \"k\" was written after the transaction's snapshot; \
    ///      nothing was committed, retry the transaction"
    /// );
    /// ```
    pub fn is_conflict(&self) -> bool {
        matches!(self, Error::Conflict { .. })
    }
}

/// " of keyspace \"name\"" in a conflict's message, nothing for the
/// default keyspace (whose messages stay as they were before keyspaces).
fn keyspace_words(keyspace: &str) -> String {
    if keyspace == crate::keyspace_prefix::DEFAULT_KEYSPACE {
        String::new()
    } else {
        format!(" of keyspace \"{}\"", keyspace.escape_default())
    }
}

/// Adds a context message to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn context(self, f: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn context(self, f: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::io(f(), e))
    }
}
