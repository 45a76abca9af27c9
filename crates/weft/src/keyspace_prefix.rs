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

/// True when `key` lies in the span reserved for keyspaces.
pub(crate) fn is_reserved(key: &[u8]) -> bool {
    key.starts_with(RESERVED)
}

/// The name of keyspace 0, the plain `Db` API's keys (here, in the leaf,
/// so that `error` can name it without importing `db`).
pub const DEFAULT_KEYSPACE: &str = "default";
