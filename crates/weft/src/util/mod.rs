//! The floor every other module stands on: checksums and record framing,
//! varints, hashes, cache-line prefetch, file-system helpers, read-only
//! mappings, positional reads, per-thread stripes, thread priority and the
//! concurrency primitives the loom models swap out.
//!
//! Nothing here imports anything else from the crate (`tests/layering.rs`
//! checks it), so a change above never reaches down, and a format helper
//! used by two file kinds is written once.

pub(crate) mod coding;
pub(crate) mod crc;
pub(crate) mod fs;
pub(crate) mod hash;
pub(crate) mod mapping;
pub(crate) mod pread;
pub(crate) mod prefetch;
pub(crate) mod rate_limiter;
pub(crate) mod stripe;
pub(crate) mod sync;
pub(crate) mod thread_priority;
