//! The memtables' key hash (the cuckoo `KeyMap` of `cuckoo` and `teks`).
//!
//! In memory only, so it may change with any release: it shares the
//! construction of the hash index's on-disk hash
//! ([`crate::util::hash::wyhash64`]) but not its seed or its pinned
//! vectors, and tuning one never changes the other.

use crate::util::hash::wyhash64;

/// The memtables' seed ("WeftMemT").
const SEED: u64 = 0x5765_6674_4d65_6d54;

/// The 64-bit hash of a user key.
#[inline]
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    wyhash64(key, SEED)
}
