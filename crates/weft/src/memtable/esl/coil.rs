//! The cache-optimised index levels (COIL): sorted arrays over the PDL.
//!
//! Level 0 has one entry per PDL node (at build time); level `i + 1` takes
//! every [`FANOUT`]th entry of level `i`, up to a top level of at most
//! `FANOUT` entries. Each level is stored as parallel arrays (struct of
//! arrays), so a search reads only the key prefixes it compares:
//!
//! * `prefix[i]`: 8 key bytes after the prefix every indexed key shares
//!   (`lcp`), big-endian — fixed-width, compared as one `u64`;
//! * `down[i]`: the entry's position in the level below (upper levels);
//! * `data[i]`: a shortcut to the data node (a search that meets its key
//!   stops there, at any level);
//! * `pdl[i]` (level 0): the PDL node, where a search continues.
//!
//! Search per level: exponential probing from the entry the level above
//! pointed to (which is known to sort before the key), then a linear scan
//! of the last gap, comparing prefixes and the full key only on a prefix
//! tie. Cutting the shared prefix `lcp` keeps the 8 compared bytes
//! informative for keys like `user000000012345`.
//!
//! A COIL is immutable once built; the worker publishes a new one by
//! pointer swap (see the parent module for why and for reclamation).

use std::cmp::Ordering as CmpOrdering;
use std::mem::size_of;

use super::pdl::Pdl;
use crate::key::compares::{self, key_prefix};
use crate::memtable::jellyfish::node::Node;

/// Entries of a level per entry of the level above.
pub(super) const FANOUT: usize = 16;

struct Level {
    prefix: Vec<u64>,
    down: Vec<u32>,
    data: Vec<Node>,
    pdl: Vec<Pdl>,
}

impl Level {
    fn bytes(&self) -> usize {
        self.prefix.capacity() * size_of::<u64>()
            + self.down.capacity() * size_of::<u32>()
            + self.data.capacity() * size_of::<Node>()
            + self.pdl.capacity() * size_of::<Pdl>()
    }
}

/// One immutable index snapshot. See the module docs.
pub(super) struct Coil {
    lcp: Vec<u8>,
    levels: Vec<Level>,
}

/// Where a COIL search left the reader.
#[derive(Debug, Clone, Copy)]
pub(super) enum Hit {
    /// The data node of the key itself.
    Exact(Node),
    /// A PDL node before the key; walk on from there.
    Before(Pdl),
    /// Nothing indexed is before the key: start at the PDL head.
    Start,
}

enum Target {
    Below,
    Above,
    Prefix(u64),
}

impl Coil {
    /// Builds a COIL over `entries` (sorted PDL nodes); `None` when empty.
    pub(super) fn build(entries: Vec<Pdl>) -> Option<Coil> {
        let first = entries.first()?.data().key();
        let last = entries.last()?.data().key();
        let lcp_len = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let lcp = first[..lcp_len].to_vec();
        let data: Vec<Node> = entries.iter().map(|p| p.data()).collect();
        let prefix = data
            .iter()
            .map(|n| key_prefix(&n.key()[lcp_len..]))
            .collect();
        let mut levels = vec![Level {
            prefix,
            down: Vec::new(),
            data,
            pdl: entries,
        }];
        while let Some(below) = levels.last().filter(|l| l.prefix.len() > FANOUT) {
            let idx: Vec<usize> = (0..below.prefix.len()).step_by(FANOUT).collect();
            let level = Level {
                prefix: idx.iter().map(|&i| below.prefix[i]).collect(),
                down: idx.iter().map(|&i| i as u32).collect(),
                data: idx.iter().map(|&i| below.data[i]).collect(),
                pdl: Vec::new(),
            };
            levels.push(level);
        }
        Some(Coil { lcp, levels })
    }

    /// Entries of level 0 (PDL nodes indexed).
    pub(super) fn len(&self) -> usize {
        self.levels[0].prefix.len()
    }

    /// Number of levels.
    pub(super) fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Heap bytes held.
    pub(super) fn bytes(&self) -> usize {
        size_of::<Coil>()
            + self.lcp.capacity()
            + self.levels.iter().map(Level::bytes).sum::<usize>()
    }

    /// The last PDL node indexed.
    pub(super) fn last_pdl(&self) -> Option<Pdl> {
        self.levels[0].pdl.last().copied()
    }

    fn target(&self, key: &[u8]) -> Target {
        let n = self.lcp.len();
        let m = n.min(key.len());
        match key[..m].cmp(&self.lcp[..m]) {
            CmpOrdering::Less => Target::Below,
            CmpOrdering::Greater => Target::Above,
            CmpOrdering::Equal if key.len() < n => Target::Below,
            CmpOrdering::Equal => Target::Prefix(key_prefix(&key[n..])),
        }
    }

    /// Finds the last indexed entry before `key`, or with `stop_on_exact`
    /// the key's own data node if an index level holds it.
    pub(super) fn search(&self, key: &[u8], stop_on_exact: bool) -> Hit {
        let tp = match self.target(key) {
            Target::Below => return Hit::Start,
            Target::Above => return self.last_pdl().map_or(Hit::Start, Hit::Before),
            Target::Prefix(tp) => tp,
        };
        let mut l = self.levels.len() - 1;
        let (mut lo, mut hi) = (0, self.levels[l].prefix.len());
        loop {
            let level = &self.levels[l];
            let cmp = |i: usize| match level.prefix[i].cmp(&tp) {
                CmpOrdering::Equal => compares::cmp(level.data[i].key(), key),
                o => o,
            };
            // Exponential probing: every entry in [lo, low) is before `key`.
            let mut low = lo;
            let mut step = 1;
            loop {
                let probe = low + step - 1;
                if probe >= hi || cmp(probe) != CmpOrdering::Less {
                    break;
                }
                low = probe + 1;
                step *= 2;
            }
            // Linear scan of the last gap.
            let mut first_ge = low;
            let mut exact = false;
            while first_ge < hi {
                match cmp(first_ge) {
                    CmpOrdering::Less => first_ge += 1,
                    o => {
                        exact = o == CmpOrdering::Equal;
                        break;
                    }
                }
            }
            if exact && stop_on_exact {
                return Hit::Exact(level.data[first_ge]);
            }
            if first_ge == lo {
                // Only possible at the top level (lower levels start at a
                // copy of an entry known to be before the key).
                return Hit::Start;
            }
            let j = first_ge - 1;
            if l == 0 {
                return Hit::Before(level.pdl[j]);
            }
            lo = level.down[j] as usize;
            hi = match level.down.get(j + 1) {
                Some(&d) => d as usize,
                None => self.levels[l - 1].prefix.len(),
            };
            l -= 1;
        }
    }
}
