//! Fuzz targets for every decoder of bytes that come from disk: WAL
//! records and write batches, manifest edits, table blocks, index,
//! filter and footer, compressed blocks and values, value-log records,
//! hash-index checkpoints and the lifetime counters' `STATS` file — and
//! of the bytes the server reads: RESP requests and its metadata
//! records; and the server's command handlers as a whole, driven over
//! loopback (`server_commands`: `server.rs`). README.md here says how to
//! run them for longer.
//!
//! The harness is [bolero]: one `check!()` target runs under plain
//! `cargo test` on stable Rust (its checked-in corpus, then random inputs
//! for a bounded time), so CI runs every target on every submission, and
//! the very same target runs under libFuzzer (`cargo bolero test`,
//! nightly) for long, coverage-guided runs that grow the same corpus. A
//! separate `cargo fuzz` crate would need nightly to even build, so CI
//! could not run it, and its targets would drift from the tests'.
//!
//! Every target holds a decoder to one property: for *any* input it
//! returns a value or `Error::Corruption` — never a panic, never a
//! hang (libFuzzer's per-input timeout catches one in long runs; under
//! `cargo test` it stalls the test), never an allocation a length field
//! talked it into ([`GuardedAlloc`] aborts on one and prints the input). Where an
//! encoder exists, a `*_round_trip` target also generates valid values,
//! checks `decode(encode(x)) == x`, and then mutates the encoding
//! (flipped bytes, truncation, appended bytes): the decoder must report
//! corruption or return a value that is consistent with the original
//! (per format: the original itself, a prefix of it, or at least a value
//! that decodes cleanly), never a panic. Targets whose payload sits
//! behind a checksum also recompute the checksum over mutated bytes
//! (`reseal_*`), so the parser behind it is exercised, not only the
//! checksum.

// A test fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod harness;

mod compression;
mod corpus;
mod hash_index;
mod regressions;

mod manifest;
mod resp;
mod server;
mod stats_file;
mod table;
mod value_log;
mod wal;

use weft::internals::fuzz::GuardedAlloc;

#[global_allocator]
static ALLOC: GuardedAlloc = GuardedAlloc;
