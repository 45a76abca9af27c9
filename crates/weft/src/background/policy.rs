//! Which job the pool's next free thread runs.
//!
//! Strict priority (merge, then consolidation, GC, split) let a sustained
//! write load starve everything behind merges: a merge was always due, so a
//! partition grew past `partition_size` and its value logs filled with
//! garbage for as long as the writes went on. The picker here orders jobs by
//! urgency and bounds how long any due job waits.
//!
//! **Urgency.** First a merge of a partition whose UnsortedStore reached
//! `unsorted_slowdown_tables`: writers are being slowed for it now and stall
//! at `unsorted_stop_tables`. Then the jobs that keep the store in shape: a
//! split of a partition past `partition_size` (every later merge and GC of
//! it rewrites the whole partition, so an oversized one makes them all
//! slower), then a GC past its garbage ratio (space). Then the other merges
//! (past `unsorted_limit`, or asked for by `compact`), which only shorten
//! reads until the partition reaches the slowdown count and becomes urgent.
//! Consolidation, which only speeds up scans, and munk loads and
//! rebalances (`store::munk`), which only speed up reads, last.
//!
//! **Ageing.** Each kind counts the jobs of other kinds that ran while it
//! was due; the count restarts when a job of the kind runs or when none is
//! due. A kind whose count reached [`AGE_LIMIT`] is *aged*, and the aged
//! kind that has waited longest runs before anything else (ties go by
//! urgency).
//!
//! **Why nothing starves.** Take a kind K that stays due. Once it has waited
//! `AGE_LIMIT` jobs, only an aged kind that has waited at least as long can
//! still go first. Such a kind restarts its count at zero when it runs,
//! while K's count goes on rising, so it cannot overtake K again before K
//! runs; each of the other four kinds goes first at most once. K therefore
//! waits at most `AGE_LIMIT + 4` jobs, under any load. The same bound holds
//! for an urgent merge, so writers stalled at `unsorted_stop_tables` wait
//! for a bounded number of jobs too; with an idle thread (nothing aged),
//! they wait for none.

use std::time::{Duration, Instant};

/// Jobs of other kinds that may run while a kind is due before it is aged.
/// Two lets the urgent merges of a write burst go twice as often as the
/// split or GC they hold up, and still bounds that wait to a few jobs.
pub(super) const AGE_LIMIT: u32 = 2;

/// The kinds of job the pool runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Merge of an UnsortedStore into its SortedStore.
    Merge,
    /// Split of a partition past `partition_size`.
    Split,
    /// Value-log GC.
    Gc,
    /// Consolidation of an UnsortedStore, for scans.
    Consolidate,
    /// A munk loaded or rebalanced (`store::munk`), for reads.
    Munk,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Merge,
        Kind::Split,
        Kind::Gc,
        Kind::Consolidate,
        Kind::Munk,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// What is due at one pick: which kinds have a job waiting, and whether the
/// merge waiting is one writers are being slowed for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Due {
    /// A merge is due; `Some(true)` when its partition has reached
    /// `unsorted_slowdown_tables`.
    pub merge: Option<bool>,
    /// A split is due.
    pub split: bool,
    /// A GC is due.
    pub gc: bool,
    /// A consolidation is due.
    pub consolidate: bool,
    /// A munk load or rebalance is due.
    pub munk: bool,
}

impl Due {
    fn has(&self, kind: Kind) -> bool {
        match kind {
            Kind::Merge => self.merge.is_some(),
            Kind::Split => self.split,
            Kind::Gc => self.gc,
            Kind::Consolidate => self.consolidate,
            Kind::Munk => self.munk,
        }
    }

    /// The due kinds, most urgent first (see the module docs).
    fn by_urgency(&self) -> impl Iterator<Item = Kind> + '_ {
        let urgent_merge = self.merge == Some(true);
        [
            urgent_merge.then_some(Kind::Merge),
            Some(Kind::Split),
            Some(Kind::Gc),
            (!urgent_merge).then_some(Kind::Merge),
            Some(Kind::Consolidate),
            Some(Kind::Munk),
        ]
        .into_iter()
        .flatten()
        .filter(|k| self.has(*k))
    }
}

/// The pool's memory of how long each kind has been due (one for all its
/// threads and the flush thread, locked under the state lock: each pick is
/// one job started).
#[derive(Debug, Default)]
pub(super) struct Policy {
    /// Per kind: jobs of other kinds that ran while it was due.
    waited: [u32; 5],
    /// Per kind: since when a job of it has been seen due without one
    /// starting (for [`crate::Stats::background_jobs`]' time queued).
    due_since: [Option<Instant>; 5],
}

impl Policy {
    /// Notes what is `due` at `now`: a kind newly due starts its wait, a
    /// kind no longer due forgets it. Called at every pick and after every
    /// flush, so a wait starts when a job was first seen due, even while
    /// every thread of the pool is busy.
    pub(super) fn observe(&mut self, due: &Due, now: Instant) {
        for k in Kind::ALL {
            let since = &mut self.due_since[k.index()];
            match (due.has(k), *since) {
                (true, None) => *since = Some(now),
                (false, _) => *since = None,
                (true, Some(_)) => {}
            }
        }
    }

    /// How long the `kind` just picked had been due; a next job of it
    /// queues from `now`.
    pub(super) fn take_queued(&mut self, kind: Kind, now: Instant) -> Duration {
        let since = self.due_since[kind.index()].replace(now);
        since.map_or(Duration::ZERO, |t| now.saturating_duration_since(t))
    }

    /// Picks the kind of job to run now from what is `due` (`None` when
    /// nothing is), and counts the pick as run: the caller runs it.
    pub(super) fn pick(&mut self, due: &Due) -> Option<Kind> {
        let urgency = |k: Kind| due.by_urgency().position(|u| u == k);
        let aged = Kind::ALL
            .into_iter()
            .filter(|k| due.has(*k) && self.waited[k.index()] >= AGE_LIMIT)
            .max_by_key(|k| (self.waited[k.index()], std::cmp::Reverse(urgency(*k))));
        let chosen = aged.or_else(|| due.by_urgency().next());
        for k in Kind::ALL {
            let w = &mut self.waited[k.index()];
            *w = if Some(k) == chosen || !due.has(k) {
                0
            } else {
                w.saturating_add(1)
            };
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URGENT_MERGE: Due = Due {
        merge: Some(true),
        split: false,
        gc: false,
        consolidate: false,
        munk: false,
    };

    fn picks(policy: &mut Policy, due: Due, n: usize) -> Vec<Kind> {
        (0..n).filter_map(|_| policy.pick(&due)).collect()
    }

    #[test]
    fn nothing_due_picks_nothing() {
        assert_eq!(Policy::default().pick(&Due::default()), None);
    }

    /// With nothing aged, the order is: urgent merge, split, GC, other
    /// merge, consolidation.
    #[test]
    fn a_fresh_pick_goes_by_urgency() {
        let all = |urgent| Due {
            merge: Some(urgent),
            split: true,
            gc: true,
            consolidate: true,
            munk: true,
        };
        let first = |due: Due| Policy::default().pick(&due);
        assert_eq!(first(all(true)), Some(Kind::Merge));
        assert_eq!(first(all(false)), Some(Kind::Split));
        assert_eq!(
            first(Due {
                split: false,
                ..all(false)
            }),
            Some(Kind::Gc)
        );
        assert_eq!(
            first(Due {
                merge: Some(false),
                consolidate: true,
                ..Due::default()
            }),
            Some(Kind::Merge)
        );
        assert_eq!(
            first(Due {
                consolidate: true,
                munk: true,
                ..Due::default()
            }),
            Some(Kind::Consolidate)
        );
        assert_eq!(
            first(Due {
                munk: true,
                ..Due::default()
            }),
            Some(Kind::Munk)
        );
    }

    /// The case of the issue: urgent merges due at every pick no longer
    /// keep a due split and GC waiting for ever; each runs after at most
    /// `AGE_LIMIT + 4` other jobs, and merges still get their share.
    #[test]
    fn urgent_merges_without_end_do_not_starve_split_and_gc() {
        let mut policy = Policy::default();
        let due = Due {
            split: true,
            gc: true,
            consolidate: true,
            munk: true,
            ..URGENT_MERGE
        };
        let run = picks(&mut policy, due, 40);
        for kind in Kind::ALL {
            let at: Vec<usize> = run
                .iter()
                .enumerate()
                .filter(|(_, k)| **k == kind)
                .map(|(i, _)| i)
                .collect();
            assert!(!at.is_empty(), "{kind:?} never ran: {run:?}");
            // Gaps between runs (and before the first) stay within the bound.
            let mut last = None;
            for i in at {
                let waited = last.map_or(i, |l| i - l - 1);
                assert!(
                    waited < AGE_LIMIT as usize + Kind::ALL.len(),
                    "{kind:?} waited {waited} jobs: {run:?}"
                );
                last = Some(i);
            }
        }
        let merges = run.iter().filter(|k| **k == Kind::Merge).count();
        assert!(merges >= run.len() / Kind::ALL.len(), "{run:?}");
    }

    /// One upkeep job due beside endless urgent merges runs every
    /// `AGE_LIMIT + 1` jobs.
    #[test]
    fn a_due_split_runs_after_age_limit_merges() {
        let mut policy = Policy::default();
        let due = Due {
            split: true,
            ..URGENT_MERGE
        };
        let mut want = vec![Kind::Merge; AGE_LIMIT as usize];
        want.push(Kind::Split);
        let want: Vec<Kind> = want.repeat(3);
        assert_eq!(picks(&mut policy, due, want.len()), want);
    }

    /// A GC due only once in a while (a merge makes the garbage, the GC
    /// takes it) runs as soon as it is due, ahead of non-urgent merges.
    #[test]
    fn a_gc_goes_before_a_merge_that_stalls_no_one() {
        let mut policy = Policy::default();
        let merge = Due {
            merge: Some(false),
            ..Due::default()
        };
        assert_eq!(picks(&mut policy, merge, 3), vec![Kind::Merge; 3]);
        let both = Due { gc: true, ..merge };
        assert_eq!(policy.pick(&both), Some(Kind::Gc));
        assert_eq!(policy.pick(&merge), Some(Kind::Merge));
    }

    /// A kind that stops being due forgets its wait: when it is due again,
    /// it waits its `AGE_LIMIT` jobs afresh.
    #[test]
    fn the_wait_restarts_when_a_kind_is_no_longer_due() {
        let mut policy = Policy::default();
        let with_split = Due {
            split: true,
            ..URGENT_MERGE
        };
        assert_eq!(
            picks(&mut policy, with_split, AGE_LIMIT as usize),
            vec![Kind::Merge; AGE_LIMIT as usize]
        );
        assert_eq!(policy.pick(&URGENT_MERGE), Some(Kind::Merge));
        assert_eq!(policy.pick(&with_split), Some(Kind::Merge));
    }

    /// Two aged kinds: the one that has waited longer runs first, and at
    /// equal waits the more urgent one.
    #[test]
    fn the_longest_aged_wait_runs_first_and_ties_go_by_urgency() {
        let mut policy = Policy::default();
        let gc_only = Due {
            gc: true,
            ..URGENT_MERGE
        };
        // GC waits one merge, then a split becomes due too.
        assert_eq!(policy.pick(&gc_only), Some(Kind::Merge));
        let both = Due {
            split: true,
            ..gc_only
        };
        assert_eq!(
            picks(&mut policy, both, 4),
            vec![Kind::Merge, Kind::Gc, Kind::Split, Kind::Merge]
        );
        // Equal waits: the split (more urgent) before the GC.
        let mut policy = Policy::default();
        assert_eq!(
            picks(&mut policy, both, 4),
            vec![Kind::Merge, Kind::Merge, Kind::Split, Kind::Gc]
        );
    }
}
