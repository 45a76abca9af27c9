//! Data and index blocks: a run of prefix-compressed entries plus a restart
//! array, built by [`BlockBuilder`] and walked by [`BlockIter`].
//!
//! ```text
//! entry   := shared: varint32 | unshared: varint32 | value_len: varint32
//!            | key[shared..] (unshared bytes) | value (value_len bytes)
//! block   := entry* | restart: u32 LE * num_restarts | num_restarts: u32 LE
//! ```
//!
//! Every `restart_interval`-th entry stores its whole key (`shared == 0`) and
//! its offset goes into the restart array. Seeks binary-search the restart
//! keys and then scan forward; `prev` re-scans from the restart point before
//! the current entry (LevelDB's scheme), so entries need no back pointers.
//!
//! Keys in both kinds of block are encoded internal keys. The iterator checks
//! every key it decodes (length, kind tag) and every length against the block,
//! so a malformed block becomes an error, never a panic or an out-of-range
//! slice.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::key::{compare_internal, parse_internal_key};
use crate::util::coding::{get_varint32, put_varint32};
use crate::util::mapping::ReadMapping;

/// A decoded block: its contents (trailer stripped) with the restart array
/// located and bounds-checked.
pub struct Block {
    contents: Contents,
    restart_offset: usize,
    num_restarts: usize,
    file_offset: u64,
}

/// Where a block's bytes live.
enum Contents {
    /// Read into memory of its own (the block cache's blocks).
    Owned(Vec<u8>),
    /// `len` bytes at `start` of a table's read-only mapping.
    Mapped {
        map: Arc<ReadMapping>,
        start: usize,
        len: usize,
    },
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("len", &self.len())
            .field("num_restarts", &self.num_restarts)
            .field("file_offset", &self.file_offset)
            .finish()
    }
}

impl Block {
    /// Wraps block contents read from `file_offset`; fails if the restart
    /// array does not fit.
    pub fn new(data: Vec<u8>, file_offset: u64) -> Result<Block, &'static str> {
        Block::with_contents(Contents::Owned(data), file_offset)
    }

    /// Wraps the `len` bytes at `start` of `map` (a verified block of the
    /// mapped table, trailer stripped), read from `file_offset`; fails as
    /// [`Block::new`] does, or if the range lies outside the mapping.
    pub(crate) fn mapped(
        map: Arc<ReadMapping>,
        start: usize,
        len: usize,
        file_offset: u64,
    ) -> Result<Block, &'static str> {
        if start
            .checked_add(len)
            .is_none_or(|end| end > map.bytes().len())
        {
            return Err("block past the end of the mapped table");
        }
        Block::with_contents(Contents::Mapped { map, start, len }, file_offset)
    }

    fn with_contents(contents: Contents, file_offset: u64) -> Result<Block, &'static str> {
        let mut block = Block {
            contents,
            restart_offset: 0,
            num_restarts: 0,
            file_offset,
        };
        let data = block.data();
        let Some(body) = data.len().checked_sub(4) else {
            return Err("block too short for its restart count");
        };
        let num_restarts = read_u32(data, body) as usize;
        if num_restarts > body / 4 {
            return Err("block restart count exceeds block size");
        }
        block.restart_offset = body - 4 * num_restarts;
        block.num_restarts = num_restarts;
        Ok(block)
    }

    /// The contents (trailer stripped).
    fn data(&self) -> &[u8] {
        match &self.contents {
            Contents::Owned(v) => v,
            Contents::Mapped { map, start, len } => &map.bytes()[*start..*start + *len],
        }
    }

    /// Size of the contents in bytes.
    pub fn len(&self) -> usize {
        self.data().len()
    }

    /// Entries in an index block (built with one entry per restart point);
    /// restart points in any block.
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// Where the block starts in its file (reported by corruption errors).
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }

    /// Bytes this block holds in memory, as charged to the block cache.
    pub fn charge(&self) -> usize {
        let held = match &self.contents {
            Contents::Owned(v) => v.capacity(),
            Contents::Mapped { .. } => 0,
        };
        held + std::mem::size_of::<Block>()
    }

    /// Offset of restart point `i`; an error if it points past the entries.
    fn restart_point(&self, i: usize) -> Result<usize, &'static str> {
        if i >= self.num_restarts {
            return Err("restart index out of range");
        }
        let p = read_u32(self.data(), self.restart_offset + 4 * i) as usize;
        if p > self.restart_offset {
            return Err("restart point past the entries");
        }
        Ok(p)
    }
}

/// Reads a little-endian u32 at `pos`; callers guarantee `pos + 4 <= len`
/// (returns 0 rather than panicking if they were wrong).
fn read_u32(data: &[u8], pos: usize) -> u32 {
    data.get(pos..pos + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Builds one block's contents.
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// A builder that stores a full key every `restart_interval` entries.
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval: restart_interval.max(1),
            last_key: Vec::new(),
        }
    }

    /// Appends an entry; keys must be increasing (the table builder checks).
    /// Block offsets are u32: callers keep blocks well under 4 GiB.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, (key.len() - shared) as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.counter += 1;
    }

    /// Size of the contents if finished now.
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// True if no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Appends the restart array and returns the finished contents; call
    /// [`BlockBuilder::reset`] before adding again.
    pub fn finish(&mut self) -> &[u8] {
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        self.buf
            .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        &self.buf
    }

    /// Empties the builder for the next block.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
    }
}

/// Why a block could not be walked (the caller adds file and offset).
pub type BlockError = &'static str;

/// A cursor over one block; owns its block so it can outlive any borrow.
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry (meaningful when `valid`).
    current: usize,
    /// Offset of the entry after the current one.
    next: usize,
    /// Restart block holding `current`.
    restart_index: usize,
    valid: bool,
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
}

impl BlockIter {
    /// An unpositioned cursor over `block`.
    pub fn new(block: Arc<Block>) -> BlockIter {
        BlockIter {
            block,
            current: 0,
            next: 0,
            restart_index: 0,
            valid: false,
            key: Vec::new(),
            value_start: 0,
            value_end: 0,
        }
    }

    /// The block walked.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    /// The restart point at or before the current entry: in an index block
    /// (one entry per restart point) the entry's ordinal, which is its data
    /// block's.
    pub fn restart_index(&self) -> usize {
        self.restart_index
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current encoded internal key (empty when invalid).
    pub fn key(&self) -> &[u8] {
        if self.valid {
            &self.key
        } else {
            &[]
        }
    }

    /// The current value (empty when invalid).
    pub fn value(&self) -> &[u8] {
        if self.valid {
            self.block
                .data()
                .get(self.value_start..self.value_end)
                .unwrap_or(&[])
        } else {
            &[]
        }
    }

    /// Positions on the first entry.
    pub fn seek_to_first(&mut self) -> Result<(), BlockError> {
        self.guard(|it| {
            if it.block.num_restarts == 0 {
                return Ok(());
            }
            it.seek_to_restart(0)?;
            it.parse_next()?;
            Ok(())
        })
    }

    /// Positions on the last entry.
    pub fn seek_to_last(&mut self) -> Result<(), BlockError> {
        self.guard(|it| {
            let Some(last) = it.block.num_restarts.checked_sub(1) else {
                return Ok(());
            };
            it.seek_to_restart(last)?;
            if !it.parse_next()? {
                return Ok(());
            }
            while it.next < it.block.restart_offset {
                it.parse_next()?;
            }
            Ok(())
        })
    }

    /// Positions on the first entry whose key is `>= target` (internal order).
    pub fn seek(&mut self, target: &[u8]) -> Result<(), BlockError> {
        self.guard(|it| {
            let Some(mut right) = it.block.num_restarts.checked_sub(1) else {
                return Ok(());
            };
            // Find the last restart point whose key is < target.
            let mut left = 0;
            while left < right {
                let mid = left + (right - left).div_ceil(2);
                if compare_internal(it.restart_key(mid)?, target) == Ordering::Less {
                    left = mid;
                } else {
                    right = mid - 1;
                }
            }
            it.seek_to_restart(left)?;
            while it.parse_next()? {
                if compare_internal(&it.key, target) != Ordering::Less {
                    break;
                }
            }
            Ok(())
        })
    }

    /// Moves to the next entry (invalid past the last one). Requires `valid`.
    pub fn next_entry(&mut self) -> Result<(), BlockError> {
        if !self.valid {
            return Ok(());
        }
        self.guard(|it| it.parse_next().map(|_| ()))
    }

    /// Moves to the previous entry (invalid before the first one): re-scans
    /// from the restart point before the current entry. Requires `valid`.
    pub fn prev_entry(&mut self) -> Result<(), BlockError> {
        if !self.valid {
            return Ok(());
        }
        self.guard(|it| {
            let original = it.current;
            while it.block.restart_point(it.restart_index)? >= original {
                if it.restart_index == 0 {
                    it.valid = false;
                    return Ok(());
                }
                it.restart_index -= 1;
            }
            let index = it.restart_index;
            it.seek_to_restart(index)?;
            loop {
                if !it.parse_next()? {
                    return Err("entries do not reach the previous position");
                }
                match it.next.cmp(&original) {
                    Ordering::Less => {}
                    Ordering::Equal => return Ok(()),
                    Ordering::Greater => return Err("restart point not on an entry boundary"),
                }
            }
        })
    }

    /// Runs a positioning step; any error leaves the cursor invalid.
    fn guard(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<(), BlockError>,
    ) -> Result<(), BlockError> {
        let r = f(self);
        if r.is_err() {
            self.valid = false;
        }
        r
    }

    fn seek_to_restart(&mut self, index: usize) -> Result<(), BlockError> {
        self.next = self.block.restart_point(index)?;
        self.restart_index = index;
        self.key.clear();
        self.valid = false;
        Ok(())
    }

    /// The full key stored at restart point `index` (which must share nothing).
    fn restart_key(&self, index: usize) -> Result<&[u8], BlockError> {
        let p = self.block.restart_point(index)?;
        let limit = &self.block.data()[..self.block.restart_offset];
        let (shared, p) = get_varint32(limit, p).ok_or("bad entry header")?;
        let (unshared, p) = get_varint32(limit, p).ok_or("bad entry header")?;
        let (_, p) = get_varint32(limit, p).ok_or("bad entry header")?;
        if shared != 0 {
            return Err("restart entry shares a prefix");
        }
        let key = p
            .checked_add(unshared as usize)
            .and_then(|end| limit.get(p..end))
            .ok_or("entry key past the block end")?;
        if parse_internal_key(key).is_none() {
            return Err("malformed internal key");
        }
        Ok(key)
    }

    /// Decodes the entry at `next`; `Ok(false)` (and invalid) at the end.
    fn parse_next(&mut self) -> Result<bool, BlockError> {
        self.current = self.next;
        let block = &*self.block;
        let limit = &block.data()[..block.restart_offset];
        if self.current >= limit.len() {
            self.valid = false;
            return Ok(false);
        }
        let p = self.current;
        let (shared, p) = get_varint32(limit, p).ok_or("bad entry header")?;
        let (unshared, p) = get_varint32(limit, p).ok_or("bad entry header")?;
        let (value_len, p) = get_varint32(limit, p).ok_or("bad entry header")?;
        let shared = shared as usize;
        if shared > self.key.len() {
            return Err("entry shares more than the previous key");
        }
        let key_end = p
            .checked_add(unshared as usize)
            .filter(|&e| e <= limit.len())
            .ok_or("entry key past the block end")?;
        let value_end = key_end
            .checked_add(value_len as usize)
            .filter(|&e| e <= limit.len())
            .ok_or("entry value past the block end")?;
        self.key.truncate(shared);
        self.key.extend_from_slice(&limit[p..key_end]);
        if parse_internal_key(&self.key).is_none() {
            return Err("malformed internal key");
        }
        self.value_start = key_end;
        self.value_end = value_end;
        self.next = value_end;
        while self.restart_index + 1 < block.num_restarts
            && block.restart_point(self.restart_index + 1)? <= self.current
        {
            self.restart_index += 1;
        }
        self.valid = true;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        Arc::new(Block::new(b.finish().to_vec(), 0).unwrap())
    }

    fn sample(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                let k = internal_key(format!("key{:04}", i * 2).as_bytes(), 7, ValueKind::Put);
                (k, vec![i as u8; i % 5])
            })
            .collect()
    }

    #[test]
    fn forward_backward_and_seek() {
        for interval in [1, 2, 3, 16] {
            let entries = sample(50);
            let block = build(&entries, interval);
            let mut it = BlockIter::new(block);
            it.seek_to_first().unwrap();
            for e in &entries {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&e.0[..], &e.1[..]));
                it.next_entry().unwrap();
            }
            assert!(!it.valid());
            it.seek_to_last().unwrap();
            for e in entries.iter().rev() {
                assert_eq!((it.key(), it.value()), (&e.0[..], &e.1[..]));
                it.prev_entry().unwrap();
            }
            assert!(!it.valid());
            for i in 0..101 {
                let t = internal_key(format!("key{i:04}").as_bytes(), 9, ValueKind::Put);
                it.seek(&t).unwrap();
                match entries.iter().find(|e| compare_internal(&e.0, &t).is_ge()) {
                    Some(e) => assert_eq!(it.key(), &e.0[..]),
                    None => assert!(!it.valid()),
                }
            }
        }
    }

    #[test]
    fn empty_block_is_never_valid() {
        let block = build(&[], 4);
        let mut it = BlockIter::new(block);
        it.seek_to_first().unwrap();
        assert!(!it.valid());
        it.seek_to_last().unwrap();
        assert!(!it.valid());
        it.seek(b"anything").unwrap();
        assert!(!it.valid());
    }

    #[test]
    fn garbage_blocks_error_instead_of_panicking() {
        let entries = sample(20);
        let good = build(&entries, 3).data().to_vec();
        let mut rng_state = 0x1234_5678_9abc_def0u64;
        let mut rnd = || {
            rng_state ^= rng_state << 13;
            rng_state ^= rng_state >> 7;
            rng_state ^= rng_state << 17;
            rng_state
        };
        for _ in 0..3000 {
            let mut data = good.clone();
            for _ in 0..(rnd() % 4 + 1) {
                let i = (rnd() as usize) % data.len();
                data[i] = rnd() as u8;
            }
            if rnd() % 4 == 0 {
                data.truncate((rnd() as usize) % (data.len() + 1));
            }
            let Ok(block) = Block::new(data, 0) else {
                continue;
            };
            let mut it = BlockIter::new(Arc::new(block));
            let mut steps = 0;
            if it.seek_to_first().is_ok() {
                while it.valid() && it.next_entry().is_ok() {
                    steps += 1;
                    assert!(steps < 10_000);
                }
            }
            if it.seek_to_last().is_ok() {
                while it.valid() && it.prev_entry().is_ok() {
                    steps += 1;
                    assert!(steps < 20_000);
                }
            }
            let _ = it.seek(&entries[7].0);
        }
    }
}
