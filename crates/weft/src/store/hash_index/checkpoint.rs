//! The checkpoint image of a [`HashIndex`] (UniKV §III-G).
//!
//! ```text
//!  offset  size       field (all integers little-endian)
//!  0       8          magic  "WEFTHIDX"
//!  8       4          format version (FORMAT_VERSION)
//!  12      4          bucket count N
//!  16      4          overflow entry count M
//!  20      4          table count T
//!  24      10·T       tables, oldest first: file number u64, slot u16
//!  ..      8·N        buckets:  tag u16, slot u16, link u32
//!  ..      8·M        overflow: tag u16, slot u16, link u32
//!  end−4   4          CRC32C of every byte before it
//! ```
//!
//! The image is the exact layout, so decoding needs the same hash functions:
//! any change to `hash.rs` must bump [`FORMAT_VERSION`]. Decoding checks, in
//! order: the magic, the length against the header (before allocating
//! anything), the CRC, the version, then the structure — slots valid and unique,
//! empty buckets canonical, overflow entries reachable exactly once with
//! candidate 3, chains newest first, no duplicate identity per table — so a
//! decoded index upholds every invariant the code relies on.

use super::{
    home_from, Entry, HashIndex, SlotInfo, EMPTY_SLOT, LAST, MAX_BUCKETS, MAX_OVERFLOW, MAX_TABLES,
    MIN_BUCKETS,
};

const MAGIC: &[u8; 8] = b"WEFTHIDX";
/// Version of the image layout *and* of the hash functions.
pub(super) const FORMAT_VERSION: u32 = 1;
const HEADER: usize = 24;
const TABLE_RECORD: usize = 10;
const ENTRY: usize = 8;
const CRC: usize = 4;

fn put_entry(out: &mut Vec<u8>, e: Entry) {
    out.extend_from_slice(&e.tag.to_le_bytes());
    out.extend_from_slice(&e.slot.to_le_bytes());
    out.extend_from_slice(&e.link.to_le_bytes());
}

pub(super) fn encode(ix: &HashIndex) -> Vec<u8> {
    let n = ix.buckets.len();
    let m = ix.overflow.len();
    let t = ix.order.len();
    let mut out = Vec::with_capacity(HEADER + t * TABLE_RECORD + (n + m) * ENTRY + CRC);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    out.extend_from_slice(&(m as u32).to_le_bytes());
    out.extend_from_slice(&(t as u32).to_le_bytes());
    for &s in &ix.order {
        out.extend_from_slice(&ix.info(s).table.to_le_bytes());
        out.extend_from_slice(&s.to_le_bytes());
    }
    for &e in ix.buckets.iter().chain(&ix.overflow) {
        put_entry(&mut out, e);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A bounds-checked little-endian reader.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const K: usize>(&mut self) -> Result<[u8; K], String> {
        let end = self.at.checked_add(K).filter(|&e| e <= self.bytes.len());
        let end =
            end.ok_or_else(|| format!("hash index checkpoint truncated at byte {}", self.at))?;
        let mut a = [0u8; K];
        a.copy_from_slice(&self.bytes[self.at..end]);
        self.at = end;
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16, String> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Result<u32, String> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Result<u64, String> {
        self.take().map(u64::from_le_bytes)
    }
    fn entry(&mut self) -> Result<Entry, String> {
        Ok(Entry {
            tag: self.u16()?,
            slot: self.u16()?,
            link: self.u32()?,
        })
    }
}

pub(super) fn decode(bytes: &[u8]) -> Result<HashIndex, String> {
    let err = |what: &str| Err(format!("hash index checkpoint: {what}"));
    if bytes.len() < HEADER + CRC {
        return err(&format!("{} bytes is shorter than a header", bytes.len()));
    }
    if &bytes[..8] != MAGIC {
        return err("bad magic");
    }
    let mut r = Reader { bytes, at: 8 };
    let version = r.u32()?;
    let n = r.u32()?;
    let m = r.u32()?;
    let t = r.u32()?;
    // The length must match the header exactly before anything is allocated.
    let expected = (HEADER + CRC) as u128
        + u128::from(t) * TABLE_RECORD as u128
        + (u128::from(n) + u128::from(m)) * ENTRY as u128;
    if expected != bytes.len() as u128 {
        return err(&format!(
            "length {} does not match header (expected {expected})",
            bytes.len()
        ));
    }
    let (body, crc) = bytes.split_at(bytes.len() - CRC);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32c::crc32c(body) != stored {
        return err("CRC mismatch");
    }
    if version != FORMAT_VERSION {
        return err(&format!(
            "unsupported format version {version} (expected {FORMAT_VERSION})"
        ));
    }
    if !(MIN_BUCKETS..=MAX_BUCKETS).contains(&n) {
        return err(&format!("bucket count {n} out of range"));
    }
    if m as usize > MAX_OVERFLOW {
        return err(&format!("overflow count {m} out of range"));
    }
    if t as usize > MAX_TABLES {
        return err(&format!("table count {t} out of range"));
    }

    let mut ix = HashIndex::with_buckets(n);
    for rank in 0..t as u64 {
        let table = r.u64()?;
        let slot = r.u16()?;
        if slot == EMPTY_SLOT {
            return err("table record with the empty slot");
        }
        if ix.slot_of(table).is_some() {
            return err(&format!("table {table} listed twice"));
        }
        if ix.slots.len() <= slot as usize {
            ix.slots.resize(slot as usize + 1, None);
        }
        if ix.slots[slot as usize].is_some() {
            return err(&format!("slot {slot} used twice"));
        }
        ix.slots[slot as usize] = Some(SlotInfo { table, age: rank });
        ix.order.push(slot);
        ix.by_table.insert(table, slot);
    }
    ix.free = (0..ix.slots.len() as u16)
        .rev()
        .filter(|&s| ix.slots[s as usize].is_none())
        .collect();
    ix.next_age = u64::from(t);
    let slots = ix.slots.clone();
    let live = |slot: u16| slots.get(slot as usize).copied().flatten();

    let mut entries = 0usize;
    for b in 0..n as usize {
        let e = r.entry()?;
        if e.is_empty() {
            if e != Entry::EMPTY {
                return err(&format!("empty bucket {b} is not blank"));
            }
        } else {
            if live(e.slot).is_none() {
                return err(&format!("bucket {b} refers to unknown slot {}", e.slot));
            }
            if e.next_raw() > m {
                return err(&format!("bucket {b} links past the overflow arena"));
            }
            entries += 1;
        }
        ix.buckets[b] = e;
    }
    ix.overflow.reserve_exact(m as usize);
    for o in 0..m as usize {
        let e = r.entry()?;
        if e.is_empty() || live(e.slot).is_none() {
            return err(&format!(
                "overflow entry {o} refers to unknown slot {}",
                e.slot
            ));
        }
        if e.cand() != LAST {
            return err(&format!(
                "overflow entry {o} has candidate {} (expected {LAST})",
                e.cand()
            ));
        }
        if e.next_raw() > m {
            return err(&format!("overflow entry {o} links past the overflow arena"));
        }
        ix.overflow.push(e);
    }
    debug_assert_eq!(r.at, body.len());

    // Every overflow entry is on exactly one chain, and chains are newest first.
    let mut seen = vec![false; m as usize];
    let mut reached = 0usize;
    for (b, head) in ix.buckets.iter().enumerate() {
        let mut age = u64::MAX;
        let mut next = head.next();
        while let Some(o) = next {
            if std::mem::replace(&mut seen[o], true) {
                return err(&format!(
                    "overflow entry {o} reached twice (shared or cyclic chain at bucket {b})"
                ));
            }
            reached += 1;
            let e = ix.overflow[o];
            let a = live(e.slot).map_or(0, |i| i.age);
            if a > age {
                return err(&format!("chain of bucket {b} is not newest first"));
            }
            age = a;
            next = e.next();
        }
    }
    if reached != m as usize {
        return err(&format!(
            "{} overflow entries are on no chain",
            m as usize - reached
        ));
    }
    entries += m as usize;

    // No table holds the same identity twice (inserts deduplicate).
    let mut ids: Vec<u64> = Vec::with_capacity(entries);
    for (b, &e) in ix.buckets.iter().enumerate() {
        if e.is_empty() {
            continue;
        }
        let mut push = |x: Entry| {
            let home = home_from(b as u32, x.tag, x.cand(), n);
            ids.push(u64::from(home) << 32 | u64::from(x.tag) << 16 | u64::from(x.slot));
        };
        push(e);
        let mut next = e.next();
        while let Some(o) = next {
            push(ix.overflow[o]);
            next = ix.overflow[o].next();
        }
    }
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return err("an entry is indexed twice for the same table");
    }
    ix.entries = entries;
    Ok(ix)
}
