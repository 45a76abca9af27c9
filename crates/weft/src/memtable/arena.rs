//! Bump-allocating arena for memtable nodes. STUB.
