//! Per-keyspace options (DESIGN §4.14): what a keyspace may set apart from
//! the database's [`Options`] — each layer's compression and the blob
//! threshold — how they are stored in its registry row, and the lookup
//! from a stored key to the options its write or job applies.
//!
//! # The stored form (store format 8)
//!
//! A registry row's value is the keyspace's id, then its options when any
//! is set:
//!
//! ```text
//! row     := id u32 BE | [options]
//! options := version u8 (1) | field*
//! field   := 1 | codec      unsorted_compression
//!          | 2 | codec      sorted_compression
//!          | 3 | codec      value_log_compression
//!          | 4 | u64 LE     min_blob_size (u64::MAX: usize::MAX)
//!          | 5 | u8 (0, 1)  values_in_wal
//! codec   := kind u8 (0 none, 1 LZ4, 2 zstd) | level i32 LE (0 unless zstd)
//! ```
//!
//! A field left out is the database's option at each open. A row of the
//! id alone (every row of a format-7 store) is a keyspace with none set.
//!
//! # The lookup
//!
//! Writers and jobs ask [`KeyspaceSettings::for_key`] for a key's
//! [`Resolved`] options. A key of the default keyspace (outside the
//! reserved span) costs one `starts_with`; with no keyspace set apart from
//! the database's options, not even that.

use crate::compression::Compression;
use crate::keyspace_prefix::RESERVED;
use crate::options::Options;

/// The options of one keyspace ([`crate::Db::create_keyspace`]), each
/// `None` (the default) to follow the database's [`Options`] at each open,
/// or set to apply to this keyspace's keys only. Builder-style like
/// [`Options`]. Kept in the keyspace's registry row, so they are
/// recovered at open (a read-only open's too) and travel with checkpoints
/// and backups.
///
/// What the options change is where and how the keyspace's data is
/// stored, never what reads return: blocks of a table are cut where the
/// codec changes from one keyspace to the next, and each value-log record
/// names its codec.
///
/// ```
/// use weft::{Compression, Db, KeyspaceOptions, Options};
/// let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default()).unwrap();
/// let archive = db
///     .create_keyspace(
///         "archive",
///         KeyspaceOptions::new()
///             .sorted_compression(Compression::ZSTD)
///             .value_log_compression(Compression::ZSTD),
///     )
///     .unwrap();
/// archive.put("2024-01", "x".repeat(10_000)).unwrap();
/// assert_eq!(archive.options().sorted_compression, Some(Compression::ZSTD));
/// assert_eq!(archive.options().min_blob_size, None); // the database's
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct KeyspaceOptions {
    /// [`Options::unsorted_compression`] for this keyspace's blocks in
    /// UnsortedStore tables (flushes, consolidations).
    pub unsorted_compression: Option<Compression>,
    /// [`Options::sorted_compression`] for this keyspace's blocks in
    /// SortedStore tables (merges, GC, splits).
    pub sorted_compression: Option<Compression>,
    /// [`Options::value_log_compression`] for this keyspace's values in
    /// value logs (logged in the WAL, separated by merges, moved by GC).
    pub value_log_compression: Option<Compression>,
    /// [`Options::min_blob_size`] for this keyspace's values: from this
    /// size they are logged in the WAL (with `values_in_wal`) and
    /// separated by merges; `usize::MAX` keeps every value inline.
    pub min_blob_size: Option<usize>,
    /// [`Options::values_in_wal`] for this keyspace's values.
    pub values_in_wal: Option<bool>,
}

impl KeyspaceOptions {
    /// Every option the database's; same as `KeyspaceOptions::default()`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`KeyspaceOptions::unsorted_compression`].
    pub fn unsorted_compression(mut self, compression: Compression) -> Self {
        self.unsorted_compression = Some(compression);
        self
    }

    /// Sets [`KeyspaceOptions::sorted_compression`].
    pub fn sorted_compression(mut self, compression: Compression) -> Self {
        self.sorted_compression = Some(compression);
        self
    }

    /// Sets [`KeyspaceOptions::value_log_compression`].
    pub fn value_log_compression(mut self, compression: Compression) -> Self {
        self.value_log_compression = Some(compression);
        self
    }

    /// Sets every layer's compression (as [`Options::compression`]).
    ///
    /// ```
    /// use weft::{Compression, KeyspaceOptions};
    /// let o = KeyspaceOptions::new().compression(Compression::Lz4);
    /// assert_eq!(o.unsorted_compression, Some(Compression::Lz4));
    /// assert_eq!(o.value_log_compression, Some(Compression::Lz4));
    /// ```
    pub fn compression(self, compression: Compression) -> Self {
        self.unsorted_compression(compression)
            .sorted_compression(compression)
            .value_log_compression(compression)
    }

    /// Sets [`KeyspaceOptions::min_blob_size`].
    ///
    /// ```
    /// use weft::{Db, KeyspaceOptions, Options};
    /// let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default()).unwrap();
    /// // Documents read whole: never separated from their keys.
    /// let docs = db
    ///     .create_keyspace("docs", KeyspaceOptions::new().min_blob_size(usize::MAX))
    ///     .unwrap();
    /// docs.put("readme", "y".repeat(4096)).unwrap();
    /// ```
    pub fn min_blob_size(mut self, bytes: usize) -> Self {
        self.min_blob_size = Some(bytes);
        self
    }

    /// Sets [`KeyspaceOptions::values_in_wal`].
    pub fn values_in_wal(mut self, on: bool) -> Self {
        self.values_in_wal = Some(on);
        self
    }

    /// True when no option is set (every one the database's).
    pub(crate) fn is_unset(&self) -> bool {
        *self == KeyspaceOptions::default()
    }

    /// Checks that every field set is in range (as [`Options`]' own).
    pub(crate) fn validate(&self) -> crate::Result<()> {
        if self.min_blob_size == Some(0) {
            return Err(crate::Error::InvalidArgument(
                "min_blob_size must be at least 1 (usize::MAX disables separation)".into(),
            ));
        }
        Ok(())
    }

    /// Appends the stored form (module docs; nothing when no option is set).
    pub(crate) fn encode_to(&self, out: &mut Vec<u8>) {
        if self.is_unset() {
            return;
        }
        out.push(ENCODING_VERSION);
        let codecs = [
            (TAG_UNSORTED, self.unsorted_compression),
            (TAG_SORTED, self.sorted_compression),
            (TAG_VALUE_LOG, self.value_log_compression),
        ];
        for (tag, c) in codecs {
            if let Some(c) = c {
                out.push(tag);
                let (kind, level) = match c {
                    Compression::None => (0u8, 0i32),
                    Compression::Lz4 => (1, 0),
                    Compression::Zstd(level) => (2, level),
                };
                out.push(kind);
                out.extend_from_slice(&level.to_le_bytes());
            }
        }
        if let Some(m) = self.min_blob_size {
            out.push(TAG_MIN_BLOB_SIZE);
            let m = match m {
                usize::MAX => u64::MAX,
                m => u64::try_from(m).unwrap_or(u64::MAX),
            };
            out.extend_from_slice(&m.to_le_bytes());
        }
        if let Some(on) = self.values_in_wal {
            out.push(TAG_VALUES_IN_WAL);
            out.push(u8::from(on));
        }
    }

    /// Decodes the stored form ([`KeyspaceOptions::encode_to`]); empty is
    /// no option set. Any other byte than the form allows is an error: a
    /// later layout bumps the store format, so an unknown one is damage.
    pub(crate) fn decode(mut b: &[u8]) -> Result<KeyspaceOptions, String> {
        let mut o = KeyspaceOptions::default();
        let Some((&version, rest)) = b.split_first() else {
            return Ok(o);
        };
        if version != ENCODING_VERSION {
            return Err(format!("unknown keyspace options version {version}"));
        }
        b = rest;
        let take = |n: usize, b: &mut &[u8]| -> Result<Vec<u8>, String> {
            if b.len() < n {
                return Err("keyspace options cut short".to_string());
            }
            let (head, tail) = b.split_at(n);
            *b = tail;
            Ok(head.to_vec())
        };
        while let Some((&tag, rest)) = b.split_first() {
            b = rest;
            match tag {
                TAG_UNSORTED | TAG_SORTED | TAG_VALUE_LOG => {
                    let f = take(5, &mut b)?;
                    let level = i32::from_le_bytes([f[1], f[2], f[3], f[4]]);
                    let c = match (f[0], level) {
                        (0, 0) => Compression::None,
                        (1, 0) => Compression::Lz4,
                        (2, level) if (-7..=22).contains(&level) => Compression::Zstd(level),
                        (kind, level) => {
                            return Err(format!("unknown compression {kind} (level {level})"))
                        }
                    };
                    let slot = match tag {
                        TAG_UNSORTED => &mut o.unsorted_compression,
                        TAG_SORTED => &mut o.sorted_compression,
                        _ => &mut o.value_log_compression,
                    };
                    *slot = Some(c);
                }
                TAG_MIN_BLOB_SIZE => {
                    let f = take(8, &mut b)?;
                    let m = u64::from_le_bytes(f.try_into().unwrap_or([0; 8]));
                    let m = match m {
                        u64::MAX => usize::MAX,
                        m => usize::try_from(m).unwrap_or(usize::MAX),
                    };
                    if m == 0 {
                        return Err("min_blob_size 0".to_string());
                    }
                    o.min_blob_size = Some(m);
                }
                TAG_VALUES_IN_WAL => {
                    let f = take(1, &mut b)?;
                    o.values_in_wal = Some(match f[0] {
                        0 => false,
                        1 => true,
                        x => return Err(format!("values_in_wal byte {x}")),
                    });
                }
                other => return Err(format!("unknown keyspace option tag {other}")),
            }
        }
        Ok(o)
    }
}

impl std::fmt::Display for KeyspaceOptions {
    /// The options set, as `name=value` pairs (`weft` prints them); the
    /// others follow the database's.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(c) = self.unsorted_compression {
            parts.push(format!("unsorted_compression={c}"));
        }
        if let Some(c) = self.sorted_compression {
            parts.push(format!("sorted_compression={c}"));
        }
        if let Some(c) = self.value_log_compression {
            parts.push(format!("value_log_compression={c}"));
        }
        match self.min_blob_size {
            Some(usize::MAX) => parts.push("min_blob_size=max".to_string()),
            Some(m) => parts.push(format!("min_blob_size={m}")),
            None => {}
        }
        if let Some(on) = self.values_in_wal {
            parts.push(format!("values_in_wal={on}"));
        }
        if parts.is_empty() {
            return f.write_str("the database's options");
        }
        f.write_str(&parts.join(" "))
    }
}

const ENCODING_VERSION: u8 = 1;
const TAG_UNSORTED: u8 = 1;
const TAG_SORTED: u8 = 2;
const TAG_VALUE_LOG: u8 = 3;
const TAG_MIN_BLOB_SIZE: u8 = 4;
const TAG_VALUES_IN_WAL: u8 = 5;

/// The options one keyspace's keys are written with: its own where set,
/// else the database's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub unsorted_compression: Compression,
    pub sorted_compression: Compression,
    pub value_log_compression: Compression,
    pub min_blob_size: usize,
    pub values_in_wal: bool,
}

impl Resolved {
    /// `ks` over `options`.
    pub fn of(options: &Options, ks: &KeyspaceOptions) -> Resolved {
        Resolved {
            unsorted_compression: ks
                .unsorted_compression
                .unwrap_or(options.unsorted_compression),
            sorted_compression: ks.sorted_compression.unwrap_or(options.sorted_compression),
            value_log_compression: ks
                .value_log_compression
                .unwrap_or(options.value_log_compression),
            min_blob_size: ks.min_blob_size.unwrap_or(options.min_blob_size),
            values_in_wal: ks.values_in_wal.unwrap_or(options.values_in_wal),
        }
    }

    /// The size from which a logged write's value goes to the WAL as a
    /// logged put (`Options::values_in_wal`), and the codec it is stored
    /// with; `None` when such values stay in the batch.
    #[inline]
    pub fn logged_put(&self) -> Option<(usize, Compression)> {
        (self.values_in_wal && self.min_blob_size != usize::MAX)
            .then_some((self.min_blob_size, self.value_log_compression))
    }

    /// The size from which a merge separates a value; `None`: never.
    #[inline]
    pub fn separate_from(&self) -> Option<usize> {
        (self.min_blob_size != usize::MAX).then_some(self.min_blob_size)
    }
}

/// The options of every keyspace, for the write path and the jobs: the
/// database's, and those of the keyspaces whose resolved options differ
/// from them. Replaced whole (an `ArcSwap` on `Core`) by creates, drops
/// and the open's registry read.
#[derive(Debug, Clone)]
pub(crate) struct KeyspaceSettings {
    default: Resolved,
    /// `(id, options)` of the keyspaces set apart, by id.
    others: Vec<(u32, Resolved)>,
    /// The smallest [`Resolved::logged_put`] size of any keyspace, the
    /// default one included (`None`: no keyspace logs values).
    min_logged_from: Option<usize>,
}

impl KeyspaceSettings {
    /// The settings of a database with `options` and the keyspaces
    /// `keyspaces` (`(id, options)`).
    pub fn new(
        options: &Options,
        keyspaces: impl IntoIterator<Item = (u32, KeyspaceOptions)>,
    ) -> KeyspaceSettings {
        let default = Resolved::of(options, &KeyspaceOptions::default());
        let mut others: Vec<(u32, Resolved)> = keyspaces
            .into_iter()
            .map(|(id, o)| (id, Resolved::of(options, &o)))
            .filter(|(_, r)| *r != default)
            .collect();
        others.sort_by_key(|(id, _)| *id);
        let min_logged_from = std::iter::once(&default)
            .chain(others.iter().map(|(_, r)| r))
            .filter_map(|r| r.logged_put().map(|(from, _)| from))
            .min();
        KeyspaceSettings {
            default,
            others,
            min_logged_from,
        }
    }

    /// The options the stored key `key` is written with.
    #[inline]
    pub fn for_key(&self, key: &[u8]) -> &Resolved {
        if self.others.is_empty() || !key.starts_with(RESERVED) {
            return &self.default;
        }
        self.of_reserved(key)
    }

    #[cold]
    fn of_reserved(&self, key: &[u8]) -> &Resolved {
        let Some(id) = key
            .get(RESERVED.len()..RESERVED.len() + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_be_bytes)
        else {
            return &self.default;
        };
        match self.others.binary_search_by_key(&id, |(id, _)| *id) {
            Ok(i) => &self.others[i].1,
            Err(_) => &self.default,
        }
    }

    /// The database's options (the default keyspace's).
    pub fn default_options(&self) -> &Resolved {
        &self.default
    }

    /// True when every keyspace is written with the database's options.
    pub fn is_uniform(&self) -> bool {
        self.others.is_empty()
    }

    /// The smallest value any keyspace logs in the WAL (`usize::MAX`:
    /// none does), what `Core::min_logged_from` caches.
    pub fn min_logged_from(&self) -> usize {
        self.min_logged_from.unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_and_bad_bytes_are_errors() {
        let cases = [
            KeyspaceOptions::new(),
            KeyspaceOptions::new().compression(Compression::Zstd(-3)),
            KeyspaceOptions::new()
                .sorted_compression(Compression::Lz4)
                .min_blob_size(usize::MAX)
                .values_in_wal(false),
            KeyspaceOptions::new()
                .unsorted_compression(Compression::None)
                .min_blob_size(17)
                .values_in_wal(true),
        ];
        for o in cases {
            let mut b = Vec::new();
            o.encode_to(&mut b);
            assert_eq!(b.is_empty(), o.is_unset());
            assert_eq!(KeyspaceOptions::decode(&b).unwrap(), o, "{o}");
            // A cut inside a field is an error; one between fields reads
            // fewer options (the checksum over the row is what catches a
            // cut, as for any value).
            for cut in 1..b.len() {
                if let Ok(fewer) = KeyspaceOptions::decode(&b[..cut]) {
                    assert_ne!(fewer, o, "{o} cut {cut}");
                }
            }
        }
        assert!(KeyspaceOptions::decode(&[2]).is_err());
        assert!(KeyspaceOptions::decode(&[1, 9]).is_err());
        assert!(KeyspaceOptions::decode(&[1, 5, 2]).is_err());
        assert!(KeyspaceOptions::decode(&[1, 4, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn the_lookup_finds_each_keyspace_and_defaults_elsewhere() {
        let opts = Options::default();
        let zstd = KeyspaceOptions::new().sorted_compression(Compression::ZSTD);
        let s = KeyspaceSettings::new(
            &opts,
            [
                (3, zstd),
                (1, KeyspaceOptions::new()),
                (7, KeyspaceOptions::new().min_blob_size(10)),
            ],
        );
        assert_eq!(s.others.len(), 2, "an unset keyspace is not set apart");
        let key = |id: u32| {
            let mut k = RESERVED.to_vec();
            k.extend_from_slice(&id.to_be_bytes());
            k.push(b'x');
            k
        };
        assert_eq!(s.for_key(&key(3)).sorted_compression, Compression::ZSTD);
        assert_eq!(s.for_key(&key(1)), s.default_options());
        assert_eq!(s.for_key(b"plain"), s.default_options());
        assert_eq!(s.for_key(&key(7)).min_blob_size, 10);
        assert_eq!(s.min_logged_from(), 10);
        assert_eq!(s.for_key(RESERVED), s.default_options());
        let none = KeyspaceSettings::new(&opts.clone().values_in_wal(false), []);
        assert_eq!(none.min_logged_from(), usize::MAX);
        assert!(none.is_uniform());
    }
}
