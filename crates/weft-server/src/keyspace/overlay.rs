//! An `EXEC`'s pending writes to one database, and reads that merge them
//! over the engine: what lets a queued command see the writes of the
//! commands queued before it while nothing is in the engine yet.
//!
//! The engine's optimistic [`weft::Transaction`] has read-your-own-writes
//! too, but no range deletes (the server drops a big collection and
//! flushes a database with them) and only forward range reads, where the
//! commands seek, step backwards and read at snapshots. So the server
//! keeps its own index of the batch an `EXEC` builds: point writes in an
//! ordered map, range deletes in a list (adding one removes the map's
//! writes it covers, so a later write wins as the batch's order says).

use std::collections::BTreeMap;
use std::ops::Bound;

use weft::{DbIterator, ReadOptions, WriteBatch};

use super::for_each_op;
use weft::BatchAction;

/// The pending writes of one database, as user-visible engine keys of that
/// database.
#[derive(Default, Debug)]
pub(crate) struct Overlay {
    /// Key → `Some(value)` for a put, `None` for a delete.
    map: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Range deletes `[start, end)`, in the order written.
    tombs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// What the overlay says of one key.
pub(crate) enum Lookup<'o> {
    /// Written by the `EXEC`: this value, or deleted (`None`).
    Pending(Option<&'o [u8]>),
    /// Not written: the engine has the answer.
    Base,
}

impl Overlay {
    /// Indexes the operations of `batch` (plain keys of this database), in
    /// order.
    pub(crate) fn apply(&mut self, batch: &WriteBatch) -> weft::Result<()> {
        for_each_op(batch, |key, op| {
            match op {
                BatchAction::DeleteRange { end } => {
                    if key < end {
                        let covered: Vec<Vec<u8>> = self
                            .map
                            .range::<[u8], _>((Bound::Included(key), Bound::Excluded(end)))
                            .map(|(k, _)| k.clone())
                            .collect();
                        for k in covered {
                            self.map.remove(&k);
                        }
                        self.tombs.push((key.to_vec(), end.to_vec()));
                    }
                }
                BatchAction::Put(v) => {
                    self.map.insert(key.to_vec(), Some(v.into_owned()));
                }
                BatchAction::Delete => {
                    self.map.insert(key.to_vec(), None);
                }
            }
            Ok(())
        })
    }

    /// The end of a range delete covering `key`, if any.
    fn tomb_end(&self, key: &[u8]) -> Option<&[u8]> {
        self.tombs
            .iter()
            .filter(|(s, e)| s.as_slice() <= key && key < e.as_slice())
            .map(|(_, e)| e.as_slice())
            .max()
    }

    /// The start of a range delete covering `key`, if any.
    fn tomb_start(&self, key: &[u8]) -> Option<&[u8]> {
        self.tombs
            .iter()
            .filter(|(s, e)| s.as_slice() <= key && key < e.as_slice())
            .map(|(s, _)| s.as_slice())
            .min()
    }

    /// What the overlay says of `key`.
    pub(crate) fn lookup(&self, key: &[u8]) -> Lookup<'_> {
        if let Some(v) = self.map.get(key) {
            return Lookup::Pending(v.as_deref());
        }
        if self.tomb_end(key).is_some() {
            return Lookup::Pending(None);
        }
        Lookup::Base
    }

    /// True when nothing was written.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty() && self.tombs.is_empty()
    }

    /// A cursor merging this overlay over `base` (an engine cursor bounded
    /// by `opts`, or `None` for a database the engine does not have yet).
    /// The overlay's part within the bounds is copied, so the cursor holds
    /// no borrow of the `EXEC`'s state.
    pub(crate) fn merge(&self, base: Option<DbIterator>, opts: &ReadOptions) -> Merged {
        let lo = opts
            .lower_bound
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Included);
        let hi = opts
            .upper_bound
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let in_bounds = !matches!((lo, hi), (Bound::Included(l), Bound::Excluded(h)) if l >= h);
        let mut shadow = Vec::new();
        let mut puts = Vec::new();
        if in_bounds {
            for (k, v) in self.map.range::<[u8], _>((lo, hi)) {
                shadow.push(k.clone());
                if let Some(v) = v {
                    puts.push((k.clone(), v.clone()));
                }
            }
        }
        let tombs = Overlay {
            map: BTreeMap::new(),
            tombs: self.tombs.clone(),
        };
        Merged {
            base,
            shadow,
            puts,
            tombs,
            next_put: 0,
            cur: None,
            forward: true,
        }
    }
}

/// Where a [`Merged`] cursor stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cur {
    /// On the engine cursor's key.
    Base,
    /// On `puts[i]`.
    Put(usize),
}

/// A cursor over the engine's keys with an overlay merged in: the
/// overlay's puts added or replacing, its deletes and range deletes
/// hiding. The `DbIterator` calls the commands make (seek, step both ways,
/// key, value).
///
/// Invariant while valid: moving forward, the engine cursor stands on the
/// first visible engine key at or after the position and `next_put` is
/// the first put at or after it; moving backward, the engine cursor stands
/// on the last visible engine key at or before the position and
/// `next_put` is one past the last put at or before it. The position is
/// the smaller (forward) or larger (backward) of the two.
pub struct Merged {
    base: Option<DbIterator>,
    /// Every key the overlay names within the bounds (sorted): engine
    /// keys there are hidden.
    shadow: Vec<Vec<u8>>,
    /// The overlay's puts within the bounds (sorted).
    puts: Vec<(Vec<u8>, Vec<u8>)>,
    /// The overlay's range deletes.
    tombs: Overlay,
    next_put: usize,
    cur: Option<Cur>,
    forward: bool,
}

impl Merged {
    fn base_valid(&self) -> bool {
        self.base.as_ref().is_some_and(|b| b.valid())
    }

    fn base_key(&self) -> Option<&[u8]> {
        self.base.as_ref().filter(|b| b.valid()).map(|b| b.key())
    }

    fn shadowed(&self, key: &[u8]) -> bool {
        self.shadow
            .binary_search_by(|k| k.as_slice().cmp(key))
            .is_ok()
    }

    /// Moves the engine cursor forward off hidden keys.
    fn skip_forward(&mut self) -> weft::Result<()> {
        while let Some(k) = self.base_key() {
            if let Some(end) = self.tombs.tomb_end(k) {
                let end = end.to_vec();
                if let Some(b) = self.base.as_mut() {
                    b.seek(&end)?;
                }
            } else if self.shadowed(k) {
                if let Some(b) = self.base.as_mut() {
                    b.next()?;
                }
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Moves the engine cursor backward off hidden keys.
    fn skip_backward(&mut self) -> weft::Result<()> {
        while let Some(k) = self.base_key() {
            if let Some(start) = self.tombs.tomb_start(k) {
                let start = start.to_vec();
                if let Some(b) = self.base.as_mut() {
                    b.seek_for_prev(&start)?;
                    if b.valid() && b.key() == start.as_slice() {
                        b.prev()?;
                    }
                }
            } else if self.shadowed(k) {
                if let Some(b) = self.base.as_mut() {
                    b.prev()?;
                }
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Settles the position from the two candidates.
    fn settle(&mut self) {
        let put = if self.forward {
            self.puts.get(self.next_put).map(|(k, _)| k.as_slice())
        } else {
            self.next_put
                .checked_sub(1)
                .and_then(|i| self.puts.get(i))
                .map(|(k, _)| k.as_slice())
        };
        let put_ix = if self.forward {
            self.next_put
        } else {
            self.next_put.wrapping_sub(1)
        };
        self.cur = match (self.base_key(), put) {
            (None, None) => None,
            (Some(_), None) => Some(Cur::Base),
            (None, Some(_)) => Some(Cur::Put(put_ix)),
            (Some(b), Some(p)) => {
                // Never equal: an engine key the overlay names is hidden.
                if (b < p) == self.forward {
                    Some(Cur::Base)
                } else {
                    Some(Cur::Put(put_ix))
                }
            }
        };
    }

    /// True when positioned on a key.
    pub fn valid(&self) -> bool {
        self.cur.is_some()
    }

    /// Positions on the first key.
    pub fn seek_to_first(&mut self) -> weft::Result<()> {
        if let Some(b) = self.base.as_mut() {
            b.seek_to_first()?;
        }
        self.forward = true;
        self.skip_forward()?;
        self.next_put = 0;
        self.settle();
        Ok(())
    }

    /// Positions on the last key.
    pub fn seek_to_last(&mut self) -> weft::Result<()> {
        if let Some(b) = self.base.as_mut() {
            b.seek_to_last()?;
        }
        self.forward = false;
        self.skip_backward()?;
        self.next_put = self.puts.len();
        self.settle();
        Ok(())
    }

    /// Positions on the first key `>= key`.
    pub fn seek(&mut self, key: &[u8]) -> weft::Result<()> {
        if let Some(b) = self.base.as_mut() {
            b.seek(key)?;
        }
        self.forward = true;
        self.skip_forward()?;
        self.next_put = self.puts.partition_point(|(k, _)| k.as_slice() < key);
        self.settle();
        Ok(())
    }

    /// Positions on the last key `<= key`.
    pub fn seek_for_prev(&mut self, key: &[u8]) -> weft::Result<()> {
        if let Some(b) = self.base.as_mut() {
            b.seek_for_prev(key)?;
        }
        self.forward = false;
        self.skip_backward()?;
        self.next_put = self.puts.partition_point(|(k, _)| k.as_slice() <= key);
        self.settle();
        Ok(())
    }

    /// Moves to the next key. Requires `valid()`.
    #[allow(clippy::should_implement_trait)] // `DbIterator`'s name
    pub fn next(&mut self) -> weft::Result<()> {
        let Some(cur) = self.cur else {
            return Ok(());
        };
        if !self.forward {
            // Turn around: both candidates strictly after the position.
            let at = self.key().to_vec();
            if let Some(b) = self.base.as_mut() {
                b.seek(&at)?;
                if b.valid() && b.key() == at.as_slice() {
                    b.next()?;
                }
            }
            self.forward = true;
            self.skip_forward()?;
            self.next_put = self
                .puts
                .partition_point(|(k, _)| k.as_slice() <= at.as_slice());
        } else {
            match cur {
                Cur::Base => {
                    if let Some(b) = self.base.as_mut() {
                        b.next()?;
                    }
                    self.skip_forward()?;
                }
                Cur::Put(_) => self.next_put += 1,
            }
        }
        self.settle();
        Ok(())
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) -> weft::Result<()> {
        let Some(cur) = self.cur else {
            return Ok(());
        };
        if self.forward {
            let at = self.key().to_vec();
            if let Some(b) = self.base.as_mut() {
                b.seek_for_prev(&at)?;
                if b.valid() && b.key() == at.as_slice() {
                    b.prev()?;
                }
            }
            self.forward = false;
            self.skip_backward()?;
            self.next_put = self
                .puts
                .partition_point(|(k, _)| k.as_slice() < at.as_slice());
        } else {
            match cur {
                Cur::Base => {
                    if let Some(b) = self.base.as_mut() {
                        b.prev()?;
                    }
                    self.skip_backward()?;
                }
                Cur::Put(_) => self.next_put -= 1,
            }
        }
        self.settle();
        Ok(())
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        match self.cur {
            Some(Cur::Put(i)) => &self.puts[i].0,
            Some(Cur::Base) if self.base_valid() => self.base.as_ref().map_or(&[], |b| b.key()),
            _ => &[],
        }
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        match self.cur {
            Some(Cur::Put(i)) => &self.puts[i].1,
            Some(Cur::Base) if self.base_valid() => self.base.as_ref().map_or(&[], |b| b.value()),
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The model: the engine's pairs with the batch applied in order.
    fn model(
        base: &BTreeMap<Vec<u8>, Vec<u8>>,
        ops: &[(u8, Vec<u8>, Vec<u8>)],
    ) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut m = base.clone();
        for (kind, k, v) in ops {
            match kind {
                0 => {
                    m.insert(k.clone(), v.clone());
                }
                1 => {
                    m.remove(k);
                }
                _ => {
                    if k < v {
                        let dead: Vec<Vec<u8>> = m
                            .range(k.clone()..v.clone())
                            .map(|(k, _)| k.clone())
                            .collect();
                        for d in dead {
                            m.remove(&d);
                        }
                    }
                }
            }
        }
        m
    }

    fn key(rng: &mut impl Rng) -> Vec<u8> {
        vec![b'a' + rng.gen_range(0..12u8)]
    }

    /// Random engine contents, random batches (puts, deletes, range
    /// deletes) and random cursor walks in both directions, against the
    /// model.
    #[test]
    fn merged_cursor_matches_a_model() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for round in 0..300 {
            let dir = tempfile::tempdir().unwrap();
            let db = weft::Db::open(dir.path(), weft::Options::default()).unwrap();
            let mut base = BTreeMap::new();
            for _ in 0..rng.gen_range(0..10) {
                let (k, v) = (key(&mut rng), vec![b'0' + rng.gen_range(0..10u8)]);
                db.put(&k, &v).unwrap();
                base.insert(k, v);
            }
            let mut ops = Vec::new();
            let mut batch = WriteBatch::new();
            for _ in 0..rng.gen_range(0..10) {
                let kind = rng.gen_range(0..3u8);
                let (k, v) = (key(&mut rng), key(&mut rng));
                match kind {
                    0 => batch.put(&k, &v),
                    1 => batch.delete(&k),
                    _ => batch.delete_range(&k, if k <= v { &v } else { &k }),
                };
                let v = if kind == 2 && k > v { k.clone() } else { v };
                ops.push((kind, k, v));
            }
            let mut ov = Overlay::default();
            ov.apply(&batch).unwrap();
            let want = model(&base, &ops);
            // Point lookups.
            for c in b'a'..b'a' + 12 {
                let k = [c];
                let got = match ov.lookup(&k) {
                    Lookup::Pending(v) => v.map(<[u8]>::to_vec),
                    Lookup::Base => db.get(k).unwrap(),
                };
                assert_eq!(got.as_ref(), want.get(&k[..]), "round {round} key {c}");
            }
            // Bounds.
            let (lo, hi) = (key(&mut rng), key(&mut rng));
            let opts = ReadOptions::new()
                .lower_bound(lo.clone())
                .upper_bound(hi.clone());
            let want: Vec<(Vec<u8>, Vec<u8>)> = want
                .into_iter()
                .filter(|(k, _)| *k >= lo && *k < hi)
                .collect();
            let mut it = ov.merge(Some(db.iter(&opts).unwrap()), &opts);
            // Walk: a random start, then random steps, tracking the index.
            let mut pos: Option<usize>;
            match rng.gen_range(0..4) {
                0 => {
                    it.seek_to_first().unwrap();
                    pos = (!want.is_empty()).then_some(0);
                }
                1 => {
                    it.seek_to_last().unwrap();
                    pos = want.len().checked_sub(1);
                }
                2 => {
                    let t = key(&mut rng);
                    it.seek(&t).unwrap();
                    let i = want.partition_point(|(k, _)| *k < t);
                    pos = (i < want.len()).then_some(i);
                }
                _ => {
                    let t = key(&mut rng);
                    it.seek_for_prev(&t).unwrap();
                    pos = want.partition_point(|(k, _)| *k <= t).checked_sub(1);
                }
            }
            for _ in 0..20 {
                match pos {
                    None => {
                        assert!(!it.valid(), "round {round}");
                        break;
                    }
                    Some(i) => {
                        assert!(it.valid(), "round {round}");
                        assert_eq!((it.key(), it.value()), (&want[i].0[..], &want[i].1[..]));
                        if rng.gen_bool(0.5) {
                            it.next().unwrap();
                            pos = (i + 1 < want.len()).then_some(i + 1);
                        } else {
                            it.prev().unwrap();
                            pos = i.checked_sub(1);
                        }
                    }
                }
            }
        }
    }
}
