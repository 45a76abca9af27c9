//! The span of stored keys reserved for keyspaces other than the default
//! one (`crate::db::keyspace`, DESIGN §4.14): a leaf the write batch, the
//! read path and the keyspaces share, so none of them imports the others
//! for it.

/// The first bytes of every stored key of a keyspace other than the
/// default one (and of the keyspace registry). Chosen unlikely as the
/// start of a user key; the default keyspace refuses keys that start with
/// it.
pub(crate) const RESERVED: &[u8] = b"\xffWKS";

/// The first key past the reserved span (`RESERVED`'s successor).
pub(crate) const RESERVED_END: &[u8] = b"\xffWKT";

/// A stored key of the reserved span as `(keyspace id, key within it)`;
/// `None` for a key of the default keyspace, or one too short to hold an
/// id (no write makes such a key).
pub(crate) fn split(stored: &[u8]) -> Option<(u32, &[u8])> {
    let rest = stored.strip_prefix(RESERVED)?;
    let id = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
    Some((id, &rest[4..]))
}

/// True when `key` lies in the span reserved for keyspaces.
pub(crate) fn is_reserved(key: &[u8]) -> bool {
    key.starts_with(RESERVED)
}

/// The name of keyspace 0, the plain `Db` API's keys (here, in the leaf,
/// so that `error` can name it without importing `db`).
pub const DEFAULT_KEYSPACE: &str = "default";
