//! `weft serve --sync always` killed with SIGKILL while clients write
//! lists, sets and sorted sets (pushes, pops, moves between keys, adds,
//! removes, score updates): after a restart each collection is exactly
//! what its acknowledged writes made it, or that plus the one write whose
//! reply the kill cut off (each writer has at most one in flight).

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::Served;

/// What a writer's keys hold, in a comparable form: a list in order, a
/// set sorted, a sorted set as `member=score` in score order.
type Dump = BTreeMap<String, Vec<String>>;

#[derive(Clone, Default)]
struct Model {
    lists: BTreeMap<String, VecDeque<String>>,
    sets: BTreeMap<String, std::collections::BTreeSet<String>>,
    zsets: BTreeMap<String, BTreeMap<String, i64>>,
}

impl Model {
    fn dump(&self) -> Dump {
        let mut d = Dump::new();
        for (k, l) in &self.lists {
            d.insert(k.clone(), l.iter().cloned().collect());
        }
        for (k, s) in &self.sets {
            d.insert(k.clone(), s.iter().cloned().collect());
        }
        for (k, z) in &self.zsets {
            let mut v: Vec<(i64, &String)> = z.iter().map(|(m, s)| (*s, m)).collect();
            v.sort();
            d.insert(
                k.clone(),
                v.iter().map(|(s, m)| format!("{m}={s}")).collect(),
            );
        }
        d.retain(|_, v| !v.is_empty());
        d
    }

    fn list(&mut self, k: &str) -> &mut VecDeque<String> {
        self.lists.entry(k.to_string()).or_default()
    }

    /// Applies `op` as the server does.
    fn apply(&mut self, op: &[String]) {
        let l = Self::list;
        match op[0].as_str() {
            "RPUSH" => l(self, &op[1]).push_back(op[2].clone()),
            "LPUSH" => l(self, &op[1]).push_front(op[2].clone()),
            "LPOP" => {
                l(self, &op[1]).pop_front();
            }
            "LMOVE" => {
                if let Some(v) = l(self, &op[1]).pop_back() {
                    l(self, &op[2]).push_front(v);
                }
            }
            "SADD" => {
                self.sets
                    .entry(op[1].clone())
                    .or_default()
                    .insert(op[2].clone());
            }
            "SREM" => {
                self.sets.entry(op[1].clone()).or_default().remove(&op[2]);
            }
            "SMOVE" => {
                if self.sets.entry(op[1].clone()).or_default().remove(&op[3]) {
                    self.sets
                        .entry(op[2].clone())
                        .or_default()
                        .insert(op[3].clone());
                }
            }
            "ZADD" => {
                let z = self.zsets.entry(op[1].clone()).or_default();
                z.insert(op[3].clone(), op[2].parse().unwrap());
            }
            "ZINCRBY" => {
                let z = self.zsets.entry(op[1].clone()).or_default();
                *z.entry(op[3].clone()).or_default() += op[2].parse::<i64>().unwrap();
            }
            "ZREM" => {
                self.zsets.entry(op[1].clone()).or_default().remove(&op[2]);
            }
            "ZPOPMIN" => {
                let z = self.zsets.entry(op[1].clone()).or_default();
                let min = z.iter().map(|(m, s)| (*s, m.clone())).min();
                if let Some((_, m)) = min {
                    z.remove(&m);
                }
            }
            other => panic!("no model for {other}"),
        }
    }
}

/// The `i`th write of writer `kind` (0 lists, 1 sets, 2 sorted sets) on
/// keys of `tag`.
fn op(kind: usize, tag: &str, i: u64) -> Vec<String> {
    let (a, b) = (format!("{tag}:a"), format!("{tag}:b"));
    let v = format!("v{i}");
    let m = format!("m{}", i % 37);
    let o: Vec<String> = match (kind, i % 6) {
        (0, 0 | 1) => vec!["RPUSH".into(), a, v],
        (0, 2) => vec!["LPUSH".into(), a, v],
        (0, 3) => vec!["LPOP".into(), a],
        (0, _) => vec!["LMOVE".into(), a, b, "RIGHT".into(), "LEFT".into()],
        (1, 0..=2) => vec!["SADD".into(), a, m],
        (1, 3) => vec!["SREM".into(), a, m],
        (1, _) => vec!["SMOVE".into(), a, b, m],
        (_, 0 | 1) => vec!["ZADD".into(), a, (i % 11).to_string(), m],
        (_, 2) => vec!["ZINCRBY".into(), a, "3".into(), m],
        (_, 3) => vec!["ZREM".into(), a, m],
        (_, _) => vec!["ZPOPMIN".into(), a],
    };
    o
}

fn dump_server(s: &Served, c: &mut redis::Connection, kind: usize, tag: &str) -> Dump {
    let mut d = Dump::new();
    for k in [format!("{tag}:a"), format!("{tag}:b")] {
        let v: Vec<String> = match kind {
            0 => s.read_query(c, redis::cmd("LRANGE").arg(&k).arg(0).arg(-1)),
            1 => {
                let mut v: Vec<String> = s.read_query(c, redis::cmd("SMEMBERS").arg(&k));
                v.sort();
                v
            }
            _ => {
                let v: Vec<(String, i64)> = s.read_query(
                    c,
                    redis::cmd("ZRANGE")
                        .arg(&k)
                        .arg(0)
                        .arg(-1)
                        .arg("WITHSCORES"),
                );
                let mut v: Vec<(i64, String)> = v.into_iter().map(|(m, s)| (s, m)).collect();
                v.sort();
                v.into_iter().map(|(s, m)| format!("{m}={s}")).collect()
            }
        };
        if !v.is_empty() {
            d.insert(k, v);
        }
    }
    d
}

/// Each key's length and last few elements (a failure's message).
fn summary(d: &Dump) -> String {
    d.iter()
        .map(|(k, v)| {
            format!(
                "{k}: {} elements, ..{:?}",
                v.len(),
                &v[v.len().saturating_sub(4)..]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn kill9_under_sync_always_loses_no_acknowledged_collection_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for cycle in 0..2 {
        let mut s = Served::start(&data, &["--sync", "always"]);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3)
            .map(|kind| {
                let mut c = s.conn();
                let stop = Arc::clone(&stop);
                let tag = format!("c{cycle}:k{kind}");
                std::thread::spawn(move || {
                    let mut acked = Model::default();
                    let mut n = 0u64;
                    for i in 0u64.. {
                        if stop.load(Ordering::Relaxed) {
                            return (acked, None, n);
                        }
                        let o = op(kind, &tag, i);
                        let mut cmd = redis::cmd(&o[0]);
                        for arg in &o[1..] {
                            cmd.arg(arg);
                        }
                        match cmd.query::<redis::Value>(&mut c) {
                            Ok(_) => {
                                acked.apply(&o);
                                n += 1;
                            }
                            // The kill cut this one off: it may or may not
                            // have been applied.
                            Err(_) => return (acked, Some(o), n),
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        s.child.kill().unwrap(); // SIGKILL
        let _ = s.child.wait();
        stop.store(true, Ordering::Relaxed);
        let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        drop(s);

        let s = Served::start(&data, &["--sync", "always"]);
        let mut c = s.conn();
        for (kind, (acked, in_flight, n)) in results.into_iter().enumerate() {
            assert!(
                n > 20,
                "writer {kind} made too few writes to mean anything: {n}"
            );
            let tag = format!("c{cycle}:k{kind}");
            let got = dump_server(&s, &mut c, kind, &tag);
            let mut with = acked.clone();
            if let Some(o) = &in_flight {
                with.apply(o);
            }
            assert!(
                got == acked.dump() || got == with.dump(),
                "cycle {cycle}, writer {kind} ({n} acknowledged, in flight {in_flight:?}):\n \
                 server:       {}\n acknowledged: {}",
                summary(&got),
                summary(&acked.dump())
            );
        }
    }
}
