//! A cursor over a sorted run: non-overlapping tables in key order, opened
//! one at a time (LevelDB's "level iterator").
//!
//! # Resting on a table it has not opened
//!
//! A scan's runs string the tables of many partitions together
//! (`Version::iters`), so a seek near the start of the key space lands most
//! runs on a table of some later partition — one the scan's first ten keys
//! will likely never reach. Opening it there costs an index block and a
//! data block for nothing. When a seek's target lies before a table's first
//! entry (or a run moves on to its next table), a user scan's run instead
//! rests on that entry as the table's metadata records it (`smallest`, a
//! whole internal key) and opens the table only when asked to move or for
//! the value ([`InternalIterator::prepare_value`]). RocksDB's level iterator
//! does the same with its file-boundary sentinels and "unprepared" values.
//! Background jobs read every entry anyway and never rest unopened: their
//! merges read `value()` without preparing it.

use std::sync::Arc;

use super::TableFile;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{compare_positions, parse_internal_key, user_key_of, SequenceNumber, ValueKind};
use crate::stats::ReadPurpose;
use crate::table::TableIter;

/// See the module docs.
pub struct SortedRunIter {
    tables: Vec<Arc<TableFile>>,
    index: usize,
    current: Option<TableIter>,
    /// Set while resting, unopened, on the first entry of `tables[index]`:
    /// that entry's sequence and kind (its key is the metadata's). `current`
    /// is `None` meanwhile.
    unopened: Option<(SequenceNumber, ValueKind)>,
    purpose: ReadPurpose,
    /// Tables opened so far (tests check that resting avoids opens).
    opened: usize,
}

impl SortedRunIter {
    /// A cursor over `tables`, which must be ascending and disjoint.
    pub fn new(tables: Vec<Arc<TableFile>>, purpose: ReadPurpose) -> Self {
        SortedRunIter {
            tables,
            index: 0,
            current: None,
            unopened: None,
            purpose,
            opened: 0,
        }
    }

    fn open(&mut self, i: usize) -> &mut TableIter {
        self.index = i;
        self.unopened = None;
        self.opened += 1;
        let it = self.tables[i].table.iter_for(self.purpose);
        self.current.insert(it)
    }

    /// Positions on the first entry of table `i`: resting on its metadata
    /// when this cursor may (a user scan), else by opening it.
    fn start_table(&mut self, i: usize) -> Result<()> {
        if self.may_rest() {
            if let Some(first) = parse_internal_key(&self.tables[i].meta.smallest) {
                self.index = i;
                self.current = None;
                self.unopened = Some((first.seq, first.kind));
                return Ok(());
            }
        }
        self.open(i).seek_to_first()
    }

    fn may_rest(&self) -> bool {
        matches!(self.purpose, ReadPurpose::Scan { .. })
    }

    /// Opens the table this cursor rests on, positioned on the same entry.
    fn open_resting(&mut self) -> Result<()> {
        if self.unopened.is_none() {
            return Ok(());
        }
        let i = self.index;
        self.open(i).seek_to_first()?;
        debug_assert!(
            self.cur_valid() && self.cur().user_key() == self.tables[i].meta.smallest_user_key(),
            "a table's first entry is its metadata's smallest"
        );
        Ok(())
    }

    fn cur_valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    /// Skips forward over exhausted (or empty) tables.
    fn settle_forward(&mut self) -> Result<()> {
        while !self.valid() {
            if self.current.is_none() || self.index + 1 >= self.tables.len() {
                self.current = None;
                return Ok(());
            }
            self.start_table(self.index + 1)?;
        }
        Ok(())
    }

    /// Skips backward over exhausted (or empty) tables.
    fn settle_backward(&mut self) -> Result<()> {
        while !self.cur_valid() {
            if self.current.is_none() || self.index == 0 {
                self.current = None;
                return Ok(());
            }
            let i = self.index - 1;
            self.open(i).seek_to_last()?;
        }
        Ok(())
    }

    fn cur(&self) -> &TableIter {
        self.current.as_ref().expect("SortedRunIter not valid")
    }

    /// Tables this cursor has opened since it was made.
    #[cfg(test)]
    pub fn tables_opened(&self) -> usize {
        self.opened
    }
}

impl InternalIterator for SortedRunIter {
    fn valid(&self) -> bool {
        self.unopened.is_some() || self.cur_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.unopened = None;
        if self.tables.is_empty() {
            self.current = None;
            return Ok(());
        }
        self.start_table(0)?;
        self.settle_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.unopened = None;
        if self.tables.is_empty() {
            self.current = None;
            return Ok(());
        }
        let last = self.tables.len() - 1;
        self.open(last).seek_to_last()?;
        self.settle_backward()
    }

    fn seek(&mut self, user_key: &[u8], seq: SequenceNumber) -> Result<()> {
        self.unopened = None;
        // First table whose largest entry is at or after the target.
        let i = self.tables.partition_point(|t| {
            let (k, s) = match parse_internal_key(&t.meta.largest) {
                Some(p) => (p.user_key, p.seq),
                None => (t.meta.largest_user_key(), 0),
            };
            compare_positions(k, s, user_key, seq) == std::cmp::Ordering::Less
        });
        if i >= self.tables.len() {
            self.current = None;
            return Ok(());
        }
        let starts_at_or_after_target = parse_internal_key(&self.tables[i].meta.smallest)
            .is_some_and(|first| {
                compare_positions(first.user_key, first.seq, user_key, seq)
                    != std::cmp::Ordering::Less
            });
        if starts_at_or_after_target && self.may_rest() {
            return self.start_table(i);
        }
        self.open(i).seek(user_key, seq)?;
        self.settle_forward()
    }

    fn next(&mut self) -> Result<()> {
        self.open_resting()?;
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.settle_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if self.unopened.take().is_some() {
            // Before a table's first entry comes the previous table's last:
            // the table rested on stays unopened.
            self.current = None;
            if self.index == 0 {
                return Ok(());
            }
            let i = self.index - 1;
            self.open(i).seek_to_last()?;
            return self.settle_backward();
        }
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.settle_backward()
    }

    fn prepare_value(&mut self) -> Result<()> {
        self.open_resting()
    }

    fn user_key(&self) -> &[u8] {
        match self.unopened {
            Some(_) => user_key_of(&self.tables[self.index].meta.smallest),
            None => self.cur().user_key(),
        }
    }
    fn seq(&self) -> SequenceNumber {
        match self.unopened {
            Some((seq, _)) => seq,
            None => self.cur().seq(),
        }
    }
    fn kind(&self) -> ValueKind {
        match self.unopened {
            Some((_, kind)) => kind,
            None => self.cur().kind(),
        }
    }
    fn value(&self) -> &[u8] {
        assert!(
            self.unopened.is_none(),
            "SortedRunIter::value on an unopened table: call prepare_value first"
        );
        self.cur().value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::write_entries;
    use crate::table::BlockCache;
    use rand::{Rng, SeedableRng};

    type Entry = (Vec<u8>, SequenceNumber, ValueKind, Vec<u8>);

    /// Three disjoint tables with gaps between them; keys carry one to three
    /// versions (newest first), some of them tombstones.
    fn run(dir: &std::path::Path, cache: &Arc<BlockCache>) -> Vec<Arc<TableFile>> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut seq = 10_000;
        (0..3u64)
            .map(|t| {
                let mut entries: Vec<Entry> = Vec::new();
                for i in 0..200 {
                    let key = format!("{}{i:04}", (b'b' + 2 * t as u8) as char).into_bytes();
                    for _ in 0..rng.gen_range(1..=3) {
                        seq -= 1;
                        let kind = if rng.gen_bool(0.2) {
                            ValueKind::Delete
                        } else {
                            ValueKind::Put
                        };
                        let value = match kind {
                            ValueKind::Delete => Vec::new(),
                            _ => format!("{}@{seq}", String::from_utf8_lossy(&key)).into_bytes(),
                        };
                        entries.push((key.clone(), seq, kind, value));
                    }
                }
                // Internal order: key ascending, sequence descending.
                entries.sort_by(|a, b| compare_positions(&a.0, a.1, &b.0, b.1));
                write_entries(dir, t + 1, &entries, cache)
            })
            .collect()
    }

    fn position(it: &mut SortedRunIter) -> Option<Entry> {
        it.valid().then(|| {
            it.prepare_value().unwrap();
            (
                it.user_key().to_vec(),
                it.seq(),
                it.kind(),
                it.value().to_vec(),
            )
        })
    }

    /// A user scan's run, which rests on tables it has not opened, walks
    /// exactly like a background job's, which opens every table it stands
    /// on: random seeks and steps both ways, values read after preparing.
    #[test]
    fn a_resting_run_reads_like_an_eager_one() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(BlockCache::new(1 << 20));
        let tables = run(dir.path(), &cache);
        let scan = ReadPurpose::Scan { fill_cache: true };
        let mut lazy = SortedRunIter::new(tables.clone(), scan);
        let mut eager = SortedRunIter::new(tables, ReadPurpose::Background);
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for step in 0..20_000 {
            let op = rng.gen_range(0..10);
            match op {
                0 => {
                    lazy.seek_to_first().unwrap();
                    eager.seek_to_first().unwrap();
                }
                1 => {
                    lazy.seek_to_last().unwrap();
                    eager.seek_to_last().unwrap();
                }
                2..=4 => {
                    // Targets in the tables, in the gaps and past both ends.
                    let c = (b'a' + rng.gen_range(0..8u8)) as char;
                    let key = format!("{c}{:04}", rng.gen_range(0..220)).into_bytes();
                    let seq = rng.gen_range(0..10_001);
                    lazy.seek(&key, seq).unwrap();
                    eager.seek(&key, seq).unwrap();
                }
                5..=7 if eager.valid() => {
                    lazy.next().unwrap();
                    eager.next().unwrap();
                }
                _ if eager.valid() => {
                    lazy.prev().unwrap();
                    eager.prev().unwrap();
                }
                _ => continue,
            }
            // Keys, sequences and kinds before any value is prepared...
            assert_eq!(lazy.valid(), eager.valid(), "step {step} op {op}");
            if eager.valid() {
                assert_eq!(lazy.user_key(), eager.user_key(), "step {step} op {op}");
                assert_eq!((lazy.seq(), lazy.kind()), (eager.seq(), eager.kind()));
            }
            // ...and values after, on every other step (the rest move on
            // from a resting position).
            if step % 2 == 0 {
                assert_eq!(position(&mut lazy), position(&mut eager), "step {step}");
            }
        }
    }

    /// A seek whose target lies before a table opens nothing; the table
    /// opens when the cursor moves or its value is wanted.
    #[test]
    fn a_seek_before_a_table_rests_on_it_unopened() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(BlockCache::new(1 << 20));
        let tables = run(dir.path(), &cache);
        let first_of_second = tables[1].meta.smallest_user_key().to_vec();
        let last_of_first = tables[0].meta.largest_user_key().to_vec();
        let mut it = SortedRunIter::new(tables, ReadPurpose::Scan { fill_cache: true });

        // Stepping back from a resting position opens only the table before.
        it.seek(b"c", 5_000).unwrap();
        it.prev().unwrap();
        assert_eq!(it.user_key(), last_of_first);
        assert_eq!(it.tables_opened(), 1);
        it = SortedRunIter::new(it.tables.clone(), it.purpose);

        it.seek(b"c", 5_000).unwrap(); // between the first two tables
        assert!(it.valid());
        assert_eq!(it.user_key(), first_of_second);
        assert_eq!(it.tables_opened(), 0);
        it.prepare_value().unwrap();
        assert_eq!(it.tables_opened(), 1);
        assert!(it.value().starts_with(&first_of_second) || it.kind() == ValueKind::Delete);

        it.seek(b"b0100", 5_000).unwrap(); // inside the first table
        assert_eq!(it.tables_opened(), 2);
        it.seek_to_first().unwrap();
        assert_eq!(
            it.tables_opened(),
            2,
            "resting on the first table's first entry"
        );
        it.next().unwrap();
        assert_eq!(it.tables_opened(), 3);
    }
}
