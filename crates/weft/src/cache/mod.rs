//! The block cache: byte-bounded, shared by all tables.
//!
//! STUB: signatures fixed; implementation to come.

use std::sync::Arc;

use crate::stats::CacheStats;
use crate::table::block::Block;

/// A byte-bounded cache of decoded table blocks keyed by (file, offset).
pub struct BlockCache {
    _capacity: usize,
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes of blocks.
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache {
            _capacity: capacity,
        }
    }
    /// Looks up a block.
    pub fn get(&self, _file: u64, _offset: u64) -> Option<Arc<Block>> {
        unimplemented!()
    }
    /// Inserts a block, charging `charge` bytes.
    pub fn insert(&self, _file: u64, _offset: u64, _block: Arc<Block>, _charge: usize) {
        unimplemented!()
    }
    /// Drops every block of `file` (the table was deleted).
    pub fn evict_file(&self, _file: u64) {
        unimplemented!()
    }
    /// Counters.
    pub fn stats(&self) -> CacheStats {
        unimplemented!()
    }
}
