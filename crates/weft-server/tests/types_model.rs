//! Lists, sets and sorted sets against an in-memory model: random command
//! sequences over a few keys, each reply compared with the model's after
//! every step, the whole state (every key's type, elements, deadline, and
//! DBSIZE) compared every few steps, with server restarts on the same
//! directory and keys expiring (lazily and by the background expirer) in
//! between. One seed per type runs over RESP2, another over RESP3.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::time::Duration;

use common::records::check_records;
use common::TestServer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Value;
use weft_server::resp::format_double;

/// A reply, normalised across RESP2 and RESP3.
#[derive(Debug, Clone, PartialEq)]
enum R {
    Nil,
    Ok,
    Int(i64),
    Str(String),
    Arr(Vec<R>),
    Err,
}

fn norm(v: redis::RedisResult<Value>) -> R {
    match v {
        Err(_) => R::Err,
        Ok(Value::Nil) => R::Nil,
        Ok(Value::Okay) => R::Ok,
        Ok(Value::SimpleString(s)) if s == "OK" => R::Ok,
        Ok(Value::SimpleString(s)) => R::Str(s),
        Ok(Value::Int(n)) => R::Int(n),
        Ok(Value::BulkString(b)) => R::Str(String::from_utf8(b).unwrap()),
        Ok(Value::Double(d)) => R::Str(format_double(d)),
        Ok(Value::VerbatimString { text, .. }) => R::Str(text),
        Ok(Value::Array(a)) | Ok(Value::Set(a)) => {
            R::Arr(a.into_iter().map(|v| norm(Ok(v))).collect())
        }
        Ok(Value::Map(m)) => R::Arr(
            m.into_iter()
                .flat_map(|(k, v)| [norm(Ok(k)), norm(Ok(v))])
                .collect(),
        ),
        Ok(other) => panic!("unexpected reply {other:?}"),
    }
}

fn s(x: &str) -> R {
    R::Str(x.to_string())
}

fn strs<'a>(it: impl IntoIterator<Item = &'a String>) -> R {
    R::Arr(it.into_iter().map(|x| s(x)).collect())
}

fn sorted(r: R) -> R {
    match r {
        R::Arr(mut a) => {
            a.sort_by_key(|x| format!("{x:?}"));
            R::Arr(a)
        }
        r => r,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Val {
    List(VecDeque<String>),
    Set(BTreeSet<String>),
    ZSet(BTreeMap<String, f64>),
    Str(String),
    Hash(BTreeMap<String, String>),
}

#[derive(Debug, Clone)]
struct Key {
    val: Val,
    ttl: bool,
}

#[derive(Default)]
struct Model {
    keys: BTreeMap<String, Key>,
}

impl Model {
    fn list(&mut self, k: &str) -> Option<&mut VecDeque<String>> {
        match self.keys.get_mut(k).map(|e| &mut e.val) {
            Some(Val::List(l)) => Some(l),
            _ => None,
        }
    }
    fn set(&mut self, k: &str) -> Option<&mut BTreeSet<String>> {
        match self.keys.get_mut(k).map(|e| &mut e.val) {
            Some(Val::Set(l)) => Some(l),
            _ => None,
        }
    }
    fn zset(&mut self, k: &str) -> Option<&mut BTreeMap<String, f64>> {
        match self.keys.get_mut(k).map(|e| &mut e.val) {
            Some(Val::ZSet(l)) => Some(l),
            _ => None,
        }
    }
    fn wrong(&self, k: &str, kind: &str) -> bool {
        self.keys.get(k).is_some_and(|e| {
            !matches!(
                (&e.val, kind),
                (Val::List(_), "list")
                    | (Val::Set(_), "set")
                    | (Val::ZSet(_), "zset")
                    | (Val::Str(_), "string")
                    | (Val::Hash(_), "hash")
            )
        })
    }
    /// Drops `k` if its collection became empty (Redis deletes those).
    fn tidy(&mut self, k: &str) {
        let empty = match self.keys.get(k).map(|e| &e.val) {
            Some(Val::List(l)) => l.is_empty(),
            Some(Val::Set(l)) => l.is_empty(),
            Some(Val::ZSet(l)) => l.is_empty(),
            Some(Val::Hash(l)) => l.is_empty(),
            Some(Val::Str(_)) | None => false,
        };
        if empty {
            self.keys.remove(k);
        }
    }
    /// `k`'s collection, created empty (without a deadline) if absent.
    fn ensure(&mut self, k: &str, val: Val) {
        self.keys
            .entry(k.to_string())
            .or_insert(Key { val, ttl: false });
    }

    /// A ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE input: a sorted set, a set
    /// (scores 1), nothing (empty); `None` for another type.
    fn zinput(&self, k: &str) -> Option<BTreeMap<String, f64>> {
        match self.keys.get(k).map(|e| &e.val) {
            None => Some(BTreeMap::new()),
            Some(Val::ZSet(z)) => Some(z.clone()),
            Some(Val::Set(m)) => Some(m.iter().map(|x| (x.clone(), 1.0)).collect()),
            Some(Val::List(_) | Val::Str(_) | Val::Hash(_)) => None,
        }
    }

    fn put(&mut self, k: &str, val: Val) {
        self.keys.insert(k.to_string(), Key { val, ttl: false });
        self.tidy(k);
    }
}

struct Harness {
    dir: tempfile::TempDir,
    server: Option<TestServer>,
    con: redis::Connection,
    resp3: bool,
    rng: StdRng,
    model: Model,
    keys: Vec<&'static str>,
}

fn start(dir: &Path, resp3: bool) -> (TestServer, redis::Connection) {
    let s = TestServer::at(dir, |_| {});
    let c = s.conn_proto(resp3);
    (s, c)
}

impl Harness {
    fn new(seed: u64, resp3: bool, keys: Vec<&'static str>) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let (server, con) = start(dir.path(), resp3);
        Harness {
            dir,
            server: Some(server),
            con,
            resp3,
            rng: StdRng::seed_from_u64(seed),
            model: Model::default(),
            keys,
        }
    }

    fn run(&mut self, args: &[String]) -> R {
        let mut cmd = redis::cmd(&args[0]);
        for a in &args[1..] {
            cmd.arg(a);
        }
        norm(cmd.query::<Value>(&mut self.con))
    }

    fn check(&mut self, args: &[String], want: R) {
        let got = self.run(args);
        assert_eq!(got, want, "{args:?} (resp3 {})", self.resp3);
    }

    fn restart(&mut self) {
        let s = self.server.take().unwrap();
        s.stop().unwrap();
        let (server, con) = start(self.dir.path(), self.resp3);
        self.server = Some(server);
        self.con = con;
    }

    fn key(&mut self) -> String {
        self.keys[self.rng.gen_range(0..self.keys.len())].to_string()
    }

    /// Every key's type, contents and deadline, and DBSIZE.
    fn compare_all(&mut self) {
        let all: Vec<(String, Key)> = self
            .model
            .keys
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for k in self.keys.clone() {
            if !self.model.keys.contains_key(k) {
                self.check(&a(&["TYPE", k]), R::Str("none".into()));
                // DBSIZE counts a key past its deadline until a writer or
                // the expirer deletes it, as Redis's does: a DEL finds it
                // gone (0) and deletes it.
                self.check(&a(&["DEL", k]), R::Int(0));
            }
        }
        self.check(&a(&["DBSIZE"]), R::Int(all.len() as i64));
        let R::Str(info) = self.run(&a(&["INFO", "keyspace"])) else {
            panic!("INFO keyspace");
        };
        let expires = info
            .lines()
            .find_map(|l| l.strip_prefix("db0:"))
            .map_or(0, |l| {
                l.split(',')
                    .find_map(|kv| kv.strip_prefix("expires="))
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            });
        assert_eq!(
            expires,
            all.iter().filter(|(_, e)| e.ttl).count(),
            "INFO expires"
        );
        for (k, e) in all {
            let got = self.run(&a(&["TTL", &k]));
            assert!(
                matches!(got, R::Int(t) if (t > 0) == e.ttl),
                "TTL {k}: {got:?}, model has a deadline: {}",
                e.ttl
            );
            match &e.val {
                Val::List(l) => {
                    self.check(&a(&["TYPE", &k]), s("list"));
                    self.check(&a(&["LRANGE", &k, "0", "-1"]), strs(l));
                }
                Val::Set(m) => {
                    self.check(&a(&["TYPE", &k]), s("set"));
                    let got = sorted(self.run(&a(&["SMEMBERS", &k])));
                    assert_eq!(got, strs(m), "SMEMBERS {k}");
                }
                Val::Str(v) => {
                    self.check(&a(&["TYPE", &k]), s("string"));
                    self.check(&a(&["GET", &k]), s(v));
                }
                Val::Hash(m) => {
                    self.check(&a(&["TYPE", &k]), s("hash"));
                    let got = self.run(&a(&["HGETALL", &k]));
                    let want: Vec<R> = m.iter().flat_map(|(f, v)| [s(f), s(v)]).collect();
                    assert_eq!(got, R::Arr(want), "HGETALL {k}");
                }
                Val::ZSet(z) => {
                    self.check(&a(&["TYPE", &k]), s("zset"));
                    let want = zrange_reply(&by_score(z), true);
                    let got = flat(self.run(&a(&["ZRANGE", &k, "0", "-1", "WITHSCORES"])));
                    assert_eq!(got, want, "ZRANGE {k}");
                }
            }
        }
    }

    /// Steps common to every type: deletes, deadlines, expiry, restarts.
    fn common_step(&mut self, step: usize) -> bool {
        let k = self.key();
        match self.rng.gen_range(0..100) {
            0..=1 => {
                let n = i64::from(self.model.keys.remove(&k).is_some());
                self.check(&a(&["DEL", &k]), R::Int(n));
            }
            2..=3 => {
                let had = self.model.keys.get_mut(&k).map(|e| e.ttl = true).is_some();
                self.check(&a(&["EXPIRE", &k, "1000"]), R::Int(i64::from(had)));
            }
            4 => {
                // Expires at once: read lazily or by the expirer.
                let had = self.model.keys.remove(&k).is_some();
                self.check(&a(&["PEXPIRE", &k, "1"]), R::Int(i64::from(had)));
                std::thread::sleep(Duration::from_millis(3));
                if self.rng.gen_bool(0.3) {
                    std::thread::sleep(Duration::from_millis(150));
                }
            }
            5 => {
                let had = self.model.keys.get_mut(&k).map(|e| e.ttl);
                if let Some(e) = self.model.keys.get_mut(&k) {
                    e.ttl = false;
                }
                self.check(&a(&["PERSIST", &k]), R::Int(i64::from(had == Some(true))));
            }
            6..=7 if step.is_multiple_of(3) => self.restart(),
            _ => return false,
        }
        true
    }
}

fn a(x: &[&str]) -> Vec<String> {
    x.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------- lists

/// Redis's LRANGE clamping.
fn clamp(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as usize, e as usize))
}

fn list_step(h: &mut Harness, step: usize) {
    if h.common_step(step) {
        return;
    }
    let k = h.key();
    let el = |h: &mut Harness| format!("e{}", h.rng.gen_range(0..5));
    let wrong = h.model.wrong(&k, "list");
    let len = h.model.list(&k).map_or(0, |l| l.len());
    match h.rng.gen_range(0..15) {
        0 | 1 => {
            let left = h.rng.gen_bool(0.5);
            let x = h.rng.gen_bool(0.2);
            // Now and then a list long enough to be dropped by range
            // deletes (256 elements and more).
            let n = if h.rng.gen_range(0..40) == 0 {
                300
            } else {
                h.rng.gen_range(1..4)
            };
            let els: Vec<String> = (0..n).map(|_| el(h)).collect();
            let name = match (left, x) {
                (true, false) => "LPUSH",
                (false, false) => "RPUSH",
                (true, true) => "LPUSHX",
                (false, true) => "RPUSHX",
            };
            let mut args = a(&[name, &k]);
            args.extend(els.iter().cloned());
            let want = if wrong {
                R::Err
            } else if x && len == 0 {
                R::Int(0)
            } else {
                h.model.ensure(&k, Val::List(VecDeque::new()));
                let l = h.model.list(&k).unwrap();
                for e in els {
                    if left {
                        l.push_front(e);
                    } else {
                        l.push_back(e);
                    }
                }
                R::Int(l.len() as i64)
            };
            h.check(&args, want);
        }
        2 | 3 => {
            let left = h.rng.gen_bool(0.5);
            let count = h.rng.gen_bool(0.5).then(|| h.rng.gen_range(0..4usize));
            let mut args = a(&[if left { "LPOP" } else { "RPOP" }, &k]);
            if let Some(c) = count {
                args.push(c.to_string());
            }
            let want = if wrong {
                R::Err
            } else if len == 0 {
                R::Nil
            } else if count == Some(0) {
                R::Arr(vec![])
            } else {
                let l = h.model.list(&k).unwrap();
                let mut got = Vec::new();
                for _ in 0..count.unwrap_or(1) {
                    if let Some(v) = if left { l.pop_front() } else { l.pop_back() } {
                        got.push(v);
                    }
                }
                h.model.tidy(&k);
                match count {
                    None => s(&got[0]),
                    Some(_) => strs(&got),
                }
            };
            h.check(&args, want);
        }
        4 => {
            let (st, en) = (h.rng.gen_range(-6..6), h.rng.gen_range(-6..6));
            let want = if wrong {
                R::Err
            } else {
                match (h.model.list(&k), clamp(len, st, en)) {
                    (Some(l), Some((s0, e0))) => strs(l.range(s0..=e0)),
                    _ => R::Arr(vec![]),
                }
            };
            h.check(&a(&["LRANGE", &k, &st.to_string(), &en.to_string()]), want);
        }
        5 => {
            let i: i64 = h.rng.gen_range(-5..5);
            let p = if i < 0 { len as i64 + i } else { i };
            let want = if wrong {
                R::Err
            } else {
                match h.model.list(&k) {
                    Some(l) if p >= 0 && (p as usize) < l.len() => s(&l[p as usize]),
                    _ => R::Nil,
                }
            };
            h.check(&a(&["LINDEX", &k, &i.to_string()]), want);
        }
        6 => {
            let i: i64 = h.rng.gen_range(-5..5);
            let e = el(h);
            let p = if i < 0 { len as i64 + i } else { i };
            let want = if wrong || len == 0 || p < 0 || p as usize >= len {
                R::Err
            } else {
                h.model.list(&k).unwrap()[p as usize] = e.clone();
                R::Ok
            };
            h.check(&a(&["LSET", &k, &i.to_string(), &e]), want);
        }
        7 => {
            let before = h.rng.gen_bool(0.5);
            let (pivot, e) = (el(h), el(h));
            let want = if wrong {
                R::Err
            } else if len == 0 {
                R::Int(0)
            } else {
                let l = h.model.list(&k).unwrap();
                match l.iter().position(|x| *x == pivot) {
                    None => R::Int(-1),
                    Some(p) => {
                        l.insert(if before { p } else { p + 1 }, e.clone());
                        R::Int(l.len() as i64)
                    }
                }
            };
            let w = if before { "BEFORE" } else { "AFTER" };
            h.check(&a(&["LINSERT", &k, w, &pivot, &e]), want);
        }
        8 => {
            let count: i64 = h.rng.gen_range(-3..4);
            let e = el(h);
            let want = if wrong {
                R::Err
            } else if len == 0 {
                R::Int(0)
            } else {
                let l = h.model.list(&k).unwrap();
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut idx: Vec<usize> = (0..l.len()).filter(|&i| l[i] == e).collect();
                if count < 0 {
                    idx.reverse();
                }
                idx.truncate(limit);
                idx.sort_unstable();
                for &i in idx.iter().rev() {
                    l.remove(i);
                }
                h.model.tidy(&k);
                R::Int(idx.len() as i64)
            };
            h.check(&a(&["LREM", &k, &count.to_string(), &e]), want);
        }
        9 => {
            let (st, en) = (h.rng.gen_range(-6..6), h.rng.gen_range(-6..6));
            let want = if wrong {
                R::Err
            } else {
                if len > 0 {
                    let l = h.model.list(&k).unwrap();
                    *l = match clamp(len, st, en) {
                        Some((s0, e0)) => l.range(s0..=e0).cloned().collect(),
                        None => VecDeque::new(),
                    };
                    h.model.tidy(&k);
                }
                R::Ok
            };
            h.check(&a(&["LTRIM", &k, &st.to_string(), &en.to_string()]), want);
        }
        10 => {
            let e = el(h);
            let rank: i64 = [1, 2, -1, -2][h.rng.gen_range(0..4)];
            let want = if wrong {
                R::Err
            } else {
                let l: Vec<String> = h
                    .model
                    .list(&k)
                    .map_or(vec![], |l| l.iter().cloned().collect());
                let mut hits: Vec<usize> = (0..l.len()).filter(|&i| l[i] == e).collect();
                if rank < 0 {
                    hits.reverse();
                }
                match hits.get(rank.unsigned_abs() as usize - 1) {
                    Some(&p) => R::Int(p as i64),
                    None => R::Nil,
                }
            };
            h.check(&a(&["LPOS", &k, &e, "RANK", &rank.to_string()]), want);
        }
        11 | 12 => {
            let dst = h.key();
            let from_left = h.rng.gen_bool(0.5);
            let to_left = h.rng.gen_bool(0.5);
            let want = if wrong {
                R::Err
            } else if len == 0 {
                R::Nil
            } else if h.model.wrong(&dst, "list") {
                R::Err
            } else {
                let l = h.model.list(&k).unwrap();
                let v = if from_left {
                    l.pop_front()
                } else {
                    l.pop_back()
                }
                .unwrap();
                h.model.ensure(&dst, Val::List(VecDeque::new()));
                let d = h.model.list(&dst).unwrap();
                if to_left {
                    d.push_front(v.clone());
                } else {
                    d.push_back(v.clone());
                }
                h.model.tidy(&k);
                s(&v)
            };
            let side = |l: bool| if l { "LEFT" } else { "RIGHT" };
            h.check(
                &a(&["LMOVE", &k, &dst, side(from_left), side(to_left)]),
                want,
            );
        }
        13 => {
            let k2 = h.key();
            let left = h.rng.gen_bool(0.5);
            let count = h.rng.gen_range(1..4usize);
            let mut want = R::Nil;
            for key in [&k, &k2] {
                if h.model.wrong(key, "list") {
                    want = R::Err;
                    break;
                }
                if let Some(l) = h.model.list(key) {
                    let mut got = Vec::new();
                    for _ in 0..count {
                        if let Some(v) = if left { l.pop_front() } else { l.pop_back() } {
                            got.push(v);
                        }
                    }
                    h.model.tidy(key);
                    want = R::Arr(vec![s(key), strs(&got)]);
                    break;
                }
            }
            let w = if left { "LEFT" } else { "RIGHT" };
            h.check(
                &a(&["LMPOP", "2", &k, &k2, w, "COUNT", &count.to_string()]),
                want,
            );
        }
        _ => {
            let want = if wrong { R::Err } else { R::Int(len as i64) };
            h.check(&a(&["LLEN", &k]), want);
        }
    }
}

// ---------------------------------------------------------------- sets

fn set_step(h: &mut Harness, step: usize) {
    if h.common_step(step) {
        return;
    }
    let k = h.key();
    let mem = |h: &mut Harness| format!("m{}", h.rng.gen_range(0..8));
    let wrong = h.model.wrong(&k, "set");
    let card = h.model.set(&k).map_or(0, |m| m.len());
    match h.rng.gen_range(0..14) {
        0..=2 => {
            let n = h.rng.gen_range(1..4);
            let ms: Vec<String> = (0..n).map(|_| mem(h)).collect();
            let mut args = a(&["SADD", &k]);
            args.extend(ms.iter().cloned());
            let want = if wrong {
                R::Err
            } else {
                h.model.ensure(&k, Val::Set(BTreeSet::new()));
                let set = h.model.set(&k).unwrap();
                R::Int(ms.into_iter().filter(|m| set.insert(m.clone())).count() as i64)
            };
            h.check(&args, want);
        }
        3 => {
            // A set bigger than the sampling threshold (random seeks).
            let n = 1100;
            let mut args = a(&["SADD", &k]);
            args.extend((0..n).map(|i| format!("big{i:05}")));
            let want = if wrong {
                R::Err
            } else {
                h.model.ensure(&k, Val::Set(BTreeSet::new()));
                let set = h.model.set(&k).unwrap();
                R::Int(
                    args[2..]
                        .iter()
                        .filter(|m| set.insert((*m).clone()))
                        .count() as i64,
                )
            };
            h.check(&args, want);
        }
        4 => {
            let ms: Vec<String> = (0..h.rng.gen_range(1..4)).map(|_| mem(h)).collect();
            let mut args = a(&["SREM", &k]);
            args.extend(ms.iter().cloned());
            let want = if wrong {
                R::Err
            } else if card == 0 {
                R::Int(0)
            } else {
                let set = h.model.set(&k).unwrap();
                let mut n = 0;
                for m in &ms {
                    n += i64::from(set.remove(m));
                }
                h.model.tidy(&k);
                R::Int(n)
            };
            h.check(&args, want);
        }
        5 => {
            let ms: Vec<String> = (0..3).map(|_| mem(h)).collect();
            let want = if wrong {
                R::Err
            } else {
                let set = h.model.set(&k).cloned().unwrap_or_default();
                R::Arr(
                    ms.iter()
                        .map(|m| R::Int(i64::from(set.contains(m))))
                        .collect(),
                )
            };
            let mut args = a(&["SMISMEMBER", &k]);
            args.extend(ms);
            h.check(&args, want);
        }
        6 | 7 => {
            // SPOP / SRANDMEMBER: random, so checked against the model's
            // contents rather than exactly.
            let pop = h.rng.gen_bool(0.5);
            let count: i64 = h.rng.gen_range(-3..5);
            let count = if pop { count.abs() } else { count };
            let args = a(&[
                if pop { "SPOP" } else { "SRANDMEMBER" },
                &k,
                &count.to_string(),
            ]);
            let got = h.run(&args);
            if wrong {
                assert_eq!(got, R::Err, "{args:?}");
                return;
            }
            let R::Arr(got) = got else {
                panic!("{args:?}: {got:?}")
            };
            let got: Vec<String> = got
                .into_iter()
                .map(|r| match r {
                    R::Str(x) => x,
                    r => panic!("{r:?}"),
                })
                .collect();
            let set = h.model.set(&k).cloned().unwrap_or_default();
            let want_len = if count < 0 {
                if set.is_empty() {
                    0
                } else {
                    count.unsigned_abs() as usize
                }
            } else {
                (count as usize).min(set.len())
            };
            assert_eq!(got.len(), want_len, "{args:?}: {got:?}");
            assert!(got.iter().all(|m| set.contains(m)), "{args:?}: {got:?}");
            if count >= 0 {
                let distinct: BTreeSet<&String> = got.iter().collect();
                assert_eq!(distinct.len(), got.len(), "{args:?}: repeats");
            }
            if pop && !got.is_empty() {
                let set = h.model.set(&k).unwrap();
                for m in &got {
                    set.remove(m);
                }
                h.model.tidy(&k);
            }
        }
        8 => {
            let (dst, m) = (h.key(), mem(h));
            let want = if card == 0 && !wrong {
                R::Int(0)
            } else if wrong || h.model.wrong(&dst, "set") {
                R::Err
            } else if !h.model.set(&k).unwrap().contains(&m) {
                R::Int(0)
            } else {
                if k != dst {
                    h.model.set(&k).unwrap().remove(&m);
                    h.model.ensure(&dst, Val::Set(BTreeSet::new()));
                    h.model.set(&dst).unwrap().insert(m.clone());
                    h.model.tidy(&k);
                }
                R::Int(1)
            };
            h.check(&a(&["SMOVE", &k, &dst, &m]), want);
        }
        9..=11 => {
            let (k2, dst) = (h.key(), h.key());
            let op = ["SINTER", "SUNION", "SDIFF"][h.rng.gen_range(0..3)];
            let store = h.rng.gen_bool(0.5);
            let err = wrong || h.model.wrong(&k2, "set");
            let s1 = h.model.set(&k).cloned().unwrap_or_default();
            let s2 = h.model.set(&k2).cloned().unwrap_or_default();
            let r: BTreeSet<String> = match op {
                "SINTER" => s1.intersection(&s2).cloned().collect(),
                "SUNION" => s1.union(&s2).cloned().collect(),
                _ => s1.difference(&s2).cloned().collect(),
            };
            if store {
                let want = if err {
                    R::Err
                } else {
                    h.model.keys.remove(&dst);
                    h.model.put(&dst, Val::Set(r.clone()));
                    R::Int(r.len() as i64)
                };
                h.check(&a(&[&format!("{op}STORE"), &dst, &k, &k2]), want);
            } else {
                let want = if err { R::Err } else { strs(&r) };
                let got = sorted(h.run(&a(&[op, &k, &k2])));
                assert_eq!(got, want, "{op} {k} {k2}");
            }
        }
        12 => {
            let k2 = h.key();
            let err = wrong || h.model.wrong(&k2, "set");
            let s1 = h.model.set(&k).cloned().unwrap_or_default();
            let s2 = h.model.set(&k2).cloned().unwrap_or_default();
            let want = if err {
                R::Err
            } else {
                R::Int(s1.intersection(&s2).count() as i64)
            };
            h.check(&a(&["SINTERCARD", "2", &k, &k2]), want);
        }
        _ => {
            let want = if wrong { R::Err } else { R::Int(card as i64) };
            h.check(&a(&["SCARD", &k]), want);
        }
    }
}

// ---------------------------------------------------------------- sorted sets

fn by_score(z: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = z.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|x, y| x.1.total_cmp(&y.1).then_with(|| x.0.cmp(&y.0)));
    v
}

fn zrange_reply(items: &[(String, f64)], withscores: bool) -> R {
    // RESP2's flat form; RESP3 pairs are flattened by `flat` below.
    let mut out = Vec::new();
    for (m, sc) in items {
        out.push(s(m));
        if withscores {
            out.push(R::Str(format_double(*sc)));
        }
    }
    R::Arr(out)
}

/// RESP3 nests `[member, score]` pairs; flatten them to compare with the
/// model's RESP2 form.
fn flat(r: R) -> R {
    match r {
        R::Arr(a) if a.iter().all(|x| matches!(x, R::Arr(p) if p.len() == 2)) && !a.is_empty() => {
            R::Arr(
                a.into_iter()
                    .flat_map(|p| match p {
                        R::Arr(p) => p,
                        _ => unreachable!(),
                    })
                    .collect(),
            )
        }
        r => r,
    }
}

const SCORES: [&str; 9] = ["-inf", "-2.5", "-1", "0", "1", "1.5", "2", "3", "+inf"];

fn parse_score(x: &str) -> f64 {
    match x {
        "-inf" => f64::NEG_INFINITY,
        "+inf" => f64::INFINITY,
        x => x.parse().unwrap(),
    }
}

fn zset_step(h: &mut Harness, step: usize) {
    if h.common_step(step) {
        return;
    }
    let k = h.key();
    let mem = |h: &mut Harness| format!("m{}", h.rng.gen_range(0..8));
    let sc = |h: &mut Harness| SCORES[h.rng.gen_range(0..SCORES.len())].to_string();
    let wrong = h.model.wrong(&k, "zset");
    let card = h.model.zset(&k).map_or(0, |z| z.len());
    match h.rng.gen_range(0..15) {
        0..=2 => {
            let flags: Vec<&str> = match h.rng.gen_range(0..8) {
                0 => vec!["NX"],
                1 => vec!["XX"],
                2 => vec!["GT", "CH"],
                3 => vec!["LT"],
                4 => vec!["CH"],
                5 => vec!["XX", "GT"],
                _ => vec![],
            };
            let mut pairs: Vec<(String, String)> = (0..h.rng.gen_range(1..4))
                .map(|_| (sc(h), mem(h)))
                .collect();
            if h.rng.gen_range(0..40) == 0 {
                // Big enough to be dropped by range deletes.
                pairs.extend((0..300).map(|i| (i.to_string(), format!("big{i:03}"))));
            }
            let mut args = a(&["ZADD", &k]);
            args.extend(flags.iter().map(|f| f.to_string()));
            for (x, m) in &pairs {
                args.push(x.clone());
                args.push(m.clone());
            }
            let has = |f: &str| flags.contains(&f);
            let want = if wrong {
                R::Err
            } else if has("XX") && card == 0 {
                R::Int(0)
            } else {
                h.model.ensure(&k, Val::ZSet(BTreeMap::new()));
                let z = h.model.zset(&k).unwrap();
                let (mut added, mut changed) = (0, 0);
                for (x, m) in &pairs {
                    let new = parse_score(x);
                    match z.get(m).copied() {
                        Some(cur) => {
                            if has("NX") || (has("GT") && new <= cur) || (has("LT") && new >= cur) {
                                continue;
                            }
                            if new != cur {
                                changed += 1;
                                z.insert(m.clone(), new);
                            }
                        }
                        None => {
                            if has("XX") {
                                continue;
                            }
                            added += 1;
                            z.insert(m.clone(), new);
                        }
                    }
                }
                h.model.tidy(&k);
                R::Int(if has("CH") { added + changed } else { added })
            };
            h.check(&args, want);
        }
        3 => {
            let (by, m) = (
                ["1", "-1", "2.5", "+inf", "-inf"][h.rng.gen_range(0..5)],
                mem(h),
            );
            let want = if wrong {
                R::Err
            } else {
                let cur = h.model.zset(&k).and_then(|z| z.get(&m).copied());
                let new = cur.unwrap_or(0.0) + parse_score(by);
                if new.is_nan() {
                    R::Err
                } else {
                    h.model.ensure(&k, Val::ZSet(BTreeMap::new()));
                    h.model.zset(&k).unwrap().insert(m.clone(), new + 0.0);
                    R::Str(format_double(new + 0.0))
                }
            };
            h.check(&a(&["ZINCRBY", &k, by, &m]), want);
        }
        4 => {
            let ms: Vec<String> = (0..h.rng.gen_range(1..3)).map(|_| mem(h)).collect();
            let want = if wrong {
                R::Err
            } else {
                let mut n = 0;
                if let Some(z) = h.model.zset(&k) {
                    for m in &ms {
                        n += i64::from(z.remove(m).is_some());
                    }
                }
                h.model.tidy(&k);
                R::Int(n)
            };
            let mut args = a(&["ZREM", &k]);
            args.extend(ms);
            h.check(&args, want);
        }
        5 => {
            let m = mem(h);
            let want = if wrong {
                R::Err
            } else {
                match h.model.zset(&k).and_then(|z| z.get(&m).copied()) {
                    Some(x) => R::Str(format_double(x)),
                    None => R::Nil,
                }
            };
            h.check(&a(&["ZSCORE", &k, &m]), want);
        }
        6 => {
            let (st, en) = (h.rng.gen_range(-5..5), h.rng.gen_range(-5..5));
            let rev = h.rng.gen_bool(0.5);
            let want = if wrong {
                R::Err
            } else {
                let mut items = h.model.zset(&k).map(|z| by_score(z)).unwrap_or_default();
                if rev {
                    items.reverse();
                }
                match clamp(items.len(), st, en) {
                    Some((s0, e0)) => zrange_reply(&items[s0..=e0], true),
                    None => R::Arr(vec![]),
                }
            };
            let mut args = a(&["ZRANGE", &k, &st.to_string(), &en.to_string()]);
            if rev {
                args.push("REV".into());
            }
            args.push("WITHSCORES".into());
            let got = flat(h.run(&args));
            assert_eq!(got, want, "{args:?}");
        }
        7 | 8 => {
            let (x, y) = (sc(h), sc(h));
            let (xe, ye) = (h.rng.gen_bool(0.3), h.rng.gen_bool(0.3));
            let rev = h.rng.gen_bool(0.5);
            let (off, cnt) = (h.rng.gen_range(0..3), h.rng.gen_range(-1..4));
            let (lo, hi) = (parse_score(&x), parse_score(&y));
            let inside =
                |v: f64| (if xe { v > lo } else { v >= lo }) && (if ye { v < hi } else { v <= hi });
            let want = if wrong {
                R::Err
            } else {
                let mut items: Vec<(String, f64)> = h
                    .model
                    .zset(&k)
                    .map(|z| by_score(z))
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(_, v)| inside(*v))
                    .collect();
                if rev {
                    items.reverse();
                }
                let items: Vec<(String, f64)> = items
                    .into_iter()
                    .skip(off)
                    .take(if cnt < 0 { usize::MAX } else { cnt as usize })
                    .collect();
                zrange_reply(&items, true)
            };
            let b = |v: &str, ex: bool| if ex { format!("({v}") } else { v.to_string() };
            let (min, max) = (b(&x, xe), b(&y, ye));
            let args = if rev {
                a(&[
                    "ZREVRANGEBYSCORE",
                    &k,
                    &max,
                    &min,
                    "WITHSCORES",
                    "LIMIT",
                    &off.to_string(),
                    &cnt.to_string(),
                ])
            } else {
                a(&[
                    "ZRANGE",
                    &k,
                    &min,
                    &max,
                    "BYSCORE",
                    "LIMIT",
                    &off.to_string(),
                    &cnt.to_string(),
                    "WITHSCORES",
                ])
            };
            let got = flat(h.run(&args));
            assert_eq!(got, want, "{args:?}");
            if !wrong {
                let n = h
                    .model
                    .zset(&k)
                    .map_or(0, |z| z.values().filter(|v| inside(**v)).count());
                h.check(&a(&["ZCOUNT", &k, &min, &max]), R::Int(n as i64));
            }
        }
        9 => {
            let m = mem(h);
            let rev = h.rng.gen_bool(0.5);
            let want = if wrong {
                R::Err
            } else {
                let mut items = h.model.zset(&k).map(|z| by_score(z)).unwrap_or_default();
                if rev {
                    items.reverse();
                }
                match items.iter().position(|(x, _)| *x == m) {
                    Some(p) => R::Int(p as i64),
                    None => R::Nil,
                }
            };
            h.check(&a(&[if rev { "ZREVRANK" } else { "ZRANK" }, &k, &m]), want);
        }
        10 => {
            let max = h.rng.gen_bool(0.5);
            let count = h.rng.gen_range(1..4);
            let want = if wrong {
                R::Err
            } else {
                let mut items = h.model.zset(&k).map(|z| by_score(z)).unwrap_or_default();
                if max {
                    items.reverse();
                }
                items.truncate(count);
                if let Some(z) = h.model.zset(&k) {
                    for (m, _) in &items {
                        z.remove(m);
                    }
                }
                h.model.tidy(&k);
                zrange_reply(&items, true)
            };
            let args = a(&[
                if max { "ZPOPMAX" } else { "ZPOPMIN" },
                &k,
                &count.to_string(),
            ]);
            let got = flat(h.run(&args));
            assert_eq!(got, want, "{args:?}");
        }
        11 => {
            let (x, y) = (sc(h), sc(h));
            let by_rank = h.rng.gen_bool(0.5);
            let (st, en) = (h.rng.gen_range(-4..4), h.rng.gen_range(-4..4));
            let want = if wrong {
                R::Err
            } else {
                let items = h.model.zset(&k).map(|z| by_score(z)).unwrap_or_default();
                let gone: Vec<String> = if by_rank {
                    match clamp(items.len(), st, en) {
                        Some((s0, e0)) => items[s0..=e0].iter().map(|(m, _)| m.clone()).collect(),
                        None => vec![],
                    }
                } else {
                    let (lo, hi) = (parse_score(&x), parse_score(&y));
                    items
                        .iter()
                        .filter(|(_, v)| *v >= lo && *v <= hi)
                        .map(|(m, _)| m.clone())
                        .collect()
                };
                if let Some(z) = h.model.zset(&k) {
                    for m in &gone {
                        z.remove(m);
                    }
                }
                h.model.tidy(&k);
                R::Int(gone.len() as i64)
            };
            let args = if by_rank {
                a(&["ZREMRANGEBYRANK", &k, &st.to_string(), &en.to_string()])
            } else {
                a(&["ZREMRANGEBYSCORE", &k, &x, &y])
            };
            h.check(&args, want);
        }
        12 | 13 => {
            let (k2, dst) = (h.key(), h.key());
            let op = ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"][h.rng.gen_range(0..3)];
            let agg = ["SUM", "MIN", "MAX"][h.rng.gen_range(0..3)];
            let w2 = ["1", "2", "-1", "0.5"][h.rng.gen_range(0..4)];
            let (z1, z2) = (h.model.zinput(&k), h.model.zinput(&k2));
            let want = if z1.is_none() || z2.is_none() {
                R::Err
            } else {
                let (z1, z2) = (z1.unwrap_or_default(), z2.unwrap_or_default());
                let w2f: f64 = w2.parse().unwrap();
                let mul = |v: f64, w: f64| {
                    let r = v * w;
                    if r.is_nan() {
                        0.0
                    } else {
                        r
                    }
                };
                let combine = |x: f64, y: f64| match agg {
                    "SUM" => {
                        let r = x + y;
                        if r.is_nan() {
                            0.0
                        } else {
                            r
                        }
                    }
                    "MIN" => x.min(y),
                    _ => x.max(y),
                };
                let mut r: BTreeMap<String, f64> = BTreeMap::new();
                match op {
                    "ZUNIONSTORE" => {
                        for (m, v) in &z1 {
                            r.insert(m.clone(), mul(*v, 1.0));
                        }
                        for (m, v) in &z2 {
                            let v = mul(*v, w2f);
                            let e = r.get(m).map_or(v, |x| combine(*x, v));
                            r.insert(m.clone(), e);
                        }
                    }
                    "ZINTERSTORE" => {
                        for (m, v) in &z1 {
                            if let Some(v2) = z2.get(m) {
                                r.insert(m.clone(), combine(mul(*v, 1.0), mul(*v2, w2f)));
                            }
                        }
                    }
                    _ => {
                        for (m, v) in &z1 {
                            if !z2.contains_key(m) {
                                r.insert(m.clone(), *v);
                            }
                        }
                    }
                }
                let r: BTreeMap<String, f64> = r.into_iter().map(|(m, v)| (m, v + 0.0)).collect();
                let n = r.len();
                h.model.keys.remove(&dst);
                h.model.put(&dst, Val::ZSet(r));
                R::Int(n as i64)
            };
            let args = if op == "ZDIFFSTORE" {
                a(&[op, &dst, "2", &k, &k2])
            } else {
                a(&[op, &dst, "2", &k, &k2, "WEIGHTS", "1", w2, "AGGREGATE", agg])
            };
            h.check(&args, want);
        }
        _ => {
            let want = if wrong { R::Err } else { R::Int(card as i64) };
            h.check(&a(&["ZCARD", &k]), want);
        }
    }
}

// ------------------------------------------- strings, hashes, whole keys

/// A float as INCRBYFLOAT prints it (the model's values are exact in
/// binary: sums of halves).
fn float_text(v: f64) -> String {
    format!("{v}")
}

/// Steps of the commands that change a key as a whole or a string or a
/// hash: RENAME, RENAMENX, COPY, DUMP + RESTORE, SET, GETDEL, GETEX,
/// SETRANGE, SETBIT, APPEND, INCRBYFLOAT, MSETNX, HSET, HINCRBYFLOAT,
/// HDEL. Run among the other types' steps, so they move and copy lists,
/// sets and sorted sets too, big ones included.
fn keys_step(h: &mut Harness, step: usize) {
    if h.common_step(step) {
        return;
    }
    let k = h.key();
    let k2 = h.key();
    let exists = h.model.keys.contains_key(&k);
    match h.rng.gen_range(0..16) {
        0 | 1 => {
            let nx = h.rng.gen_bool(0.3);
            let want = if !exists {
                R::Err
            } else if k == k2 {
                if nx {
                    R::Int(0)
                } else {
                    R::Ok
                }
            } else if nx && h.model.keys.contains_key(&k2) {
                R::Int(0)
            } else {
                let e = h.model.keys.remove(&k).unwrap();
                h.model.keys.insert(k2.clone(), e);
                if nx {
                    R::Int(1)
                } else {
                    R::Ok
                }
            };
            h.check(&a(&[if nx { "RENAMENX" } else { "RENAME" }, &k, &k2]), want);
        }
        2 | 3 => {
            let replace = h.rng.gen_bool(0.5);
            let want = if k == k2 {
                R::Err
            } else if !exists || (h.model.keys.contains_key(&k2) && !replace) {
                R::Int(0)
            } else {
                let e = h.model.keys[&k].clone();
                h.model.keys.insert(k2.clone(), e);
                R::Int(1)
            };
            let mut args = a(&["COPY", &k, &k2]);
            if replace {
                args.push("REPLACE".into());
            }
            h.check(&args, want);
        }
        4 => {
            // DUMP, then RESTORE the payload under another key.
            let payload: Option<Vec<u8>> = redis::cmd("DUMP").arg(&k).query(&mut h.con).unwrap();
            assert_eq!(payload.is_some(), exists, "DUMP {k}");
            if let Some(p) = payload {
                let r: redis::RedisResult<Value> = redis::cmd("RESTORE")
                    .arg(&k2)
                    .arg(0)
                    .arg(p)
                    .arg("REPLACE")
                    .query(&mut h.con);
                assert_eq!(norm(r), R::Ok, "RESTORE {k2}");
                let val = h.model.keys[&k].val.clone();
                h.model.keys.insert(k2.clone(), Key { val, ttl: false });
            }
        }
        5 => {
            let v = ["1", "x5", "2.5", "abc"][h.rng.gen_range(0..4)];
            h.model.keys.insert(
                k.clone(),
                Key {
                    val: Val::Str(v.into()),
                    ttl: false,
                },
            );
            h.check(&a(&["SET", &k, v]), R::Ok);
        }
        6 => {
            let want = match h.model.keys.get(&k).map(|e| &e.val) {
                None => R::Nil,
                Some(Val::Str(v)) => {
                    let v = v.clone();
                    h.model.keys.remove(&k);
                    s(&v)
                }
                Some(_) => R::Err,
            };
            h.check(&a(&["GETDEL", &k]), want);
        }
        7 => {
            let persist = h.rng.gen_bool(0.5);
            let want = match h.model.keys.get_mut(&k) {
                None => R::Nil,
                Some(Key {
                    val: Val::Str(v),
                    ttl,
                }) => {
                    *ttl = !persist;
                    s(v)
                }
                Some(_) => R::Err,
            };
            let args = if persist {
                a(&["GETEX", &k, "PERSIST"])
            } else {
                a(&["GETEX", &k, "EX", "1000"])
            };
            h.check(&args, want);
        }
        8 => {
            let off = h.rng.gen_range(0..12usize);
            let v = ["ab", "Z", "xyz"][h.rng.gen_range(0..3)];
            let want = match h.model.keys.get_mut(&k).map(|e| &mut e.val) {
                Some(Val::Str(cur)) => {
                    let mut b = cur.clone().into_bytes();
                    if b.len() < off + v.len() {
                        b.resize(off + v.len(), 0);
                    }
                    b[off..off + v.len()].copy_from_slice(v.as_bytes());
                    *cur = String::from_utf8(b).unwrap();
                    R::Int(cur.len() as i64)
                }
                Some(_) => R::Err,
                None => {
                    let mut b = vec![0u8; off];
                    b.extend_from_slice(v.as_bytes());
                    let n = b.len();
                    h.model.put(&k, Val::Str(String::from_utf8(b).unwrap()));
                    R::Int(n as i64)
                }
            };
            h.check(&a(&["SETRANGE", &k, &off.to_string(), v]), want);
        }
        9 => {
            // Bits below the top one of each byte: the value stays ASCII.
            let off = h.rng.gen_range(0..10u64) * 8 + h.rng.gen_range(1..8);
            let on = h.rng.gen_bool(0.5);
            let (byte, shift) = ((off / 8) as usize, 7 - off % 8);
            let want = match h.model.keys.get_mut(&k).map(|e| &mut e.val) {
                Some(Val::Str(cur)) => {
                    let mut b = cur.clone().into_bytes();
                    if b.len() <= byte {
                        b.resize(byte + 1, 0);
                    }
                    let old = (b[byte] >> shift) & 1;
                    if on {
                        b[byte] |= 1 << shift;
                    } else {
                        b[byte] &= !(1 << shift);
                    }
                    *cur = String::from_utf8(b).unwrap();
                    R::Int(i64::from(old))
                }
                Some(_) => R::Err,
                None => {
                    let mut b = vec![0u8; byte + 1];
                    if on {
                        b[byte] |= 1 << shift;
                    }
                    h.model.put(&k, Val::Str(String::from_utf8(b).unwrap()));
                    R::Int(0)
                }
            };
            h.check(
                &a(&["SETBIT", &k, &off.to_string(), if on { "1" } else { "0" }]),
                want,
            );
        }
        10 => {
            let want = match h.model.keys.get_mut(&k).map(|e| &mut e.val) {
                Some(Val::Str(cur)) => match cur.parse::<f64>() {
                    Ok(x) => {
                        *cur = float_text(x + 1.5);
                        s(cur)
                    }
                    Err(_) => R::Err,
                },
                Some(_) => R::Err,
                None => {
                    h.model.put(&k, Val::Str("1.5".into()));
                    s("1.5")
                }
            };
            h.check(&a(&["INCRBYFLOAT", &k, "1.5"]), want);
        }
        11 => {
            let want = if k == k2 {
                // The last value of a repeated key wins.
                if exists {
                    R::Int(0)
                } else {
                    h.model.put(&k, Val::Str("n2".into()));
                    R::Int(1)
                }
            } else if exists || h.model.keys.contains_key(&k2) {
                R::Int(0)
            } else {
                h.model.put(&k, Val::Str("n1".into()));
                h.model.put(&k2, Val::Str("n2".into()));
                R::Int(1)
            };
            h.check(&a(&["MSETNX", &k, "n1", &k2, "n2"]), want);
        }
        12 => {
            let v = ["+", "tail"][h.rng.gen_range(0..2)];
            let want = match h.model.keys.get_mut(&k).map(|e| &mut e.val) {
                Some(Val::Str(cur)) => {
                    cur.push_str(v);
                    R::Int(cur.len() as i64)
                }
                Some(_) => R::Err,
                None => {
                    h.model.put(&k, Val::Str(v.into()));
                    R::Int(v.len() as i64)
                }
            };
            h.check(&a(&["APPEND", &k, v]), want);
        }
        13 => {
            let f = format!("f{}", h.rng.gen_range(0..4));
            let want = if h.model.wrong(&k, "hash") {
                R::Err
            } else {
                h.model.ensure(&k, Val::Hash(BTreeMap::new()));
                let Some(Val::Hash(m)) = h.model.keys.get_mut(&k).map(|e| &mut e.val) else {
                    unreachable!()
                };
                R::Int(i64::from(m.insert(f.clone(), "2".into()).is_none()))
            };
            h.check(&a(&["HSET", &k, &f, "2"]), want);
        }
        14 => {
            let f = format!("f{}", h.rng.gen_range(0..4));
            let want = if h.model.wrong(&k, "hash") {
                R::Err
            } else {
                h.model.ensure(&k, Val::Hash(BTreeMap::new()));
                let Some(Val::Hash(m)) = h.model.keys.get_mut(&k).map(|e| &mut e.val) else {
                    unreachable!()
                };
                let cur: f64 = m.get(&f).map_or(0.0, |v| v.parse().unwrap());
                let v = float_text(cur - 0.5);
                m.insert(f.clone(), v.clone());
                s(&v)
            };
            h.check(&a(&["HINCRBYFLOAT", &k, &f, "-0.5"]), want);
        }
        _ => {
            let f = format!("f{}", h.rng.gen_range(0..4));
            let want = match h.model.keys.get_mut(&k).map(|e| &mut e.val) {
                Some(Val::Hash(m)) => {
                    let n = i64::from(m.remove(&f).is_some());
                    h.model.tidy(&k);
                    R::Int(n)
                }
                Some(_) => R::Err,
                None => R::Int(0),
            };
            h.check(&a(&["HDEL", &k, &f]), want);
        }
    }
}

fn run_model(
    seed: u64,
    resp3: bool,
    steps: usize,
    keys: Vec<&'static str>,
    step: fn(&mut Harness, usize),
) {
    let mut h = Harness::new(seed, resp3, keys);
    // Another type under one of the keys, so WRONGTYPE paths run too.
    for i in 0..steps {
        step(&mut h, i);
        if i % 25 == 24 {
            h.compare_all();
        }
    }
    h.restart();
    h.compare_all();
    h.server.take().unwrap().stop().unwrap();
    check_records(h.dir.path());
}

#[test]
fn lists_match_the_model() {
    run_model(1, false, 1500, vec!["l0", "l1", "l2"], list_step);
    run_model(2, true, 1500, vec!["l0", "l1"], list_step);
}

#[test]
fn sets_match_the_model() {
    run_model(3, false, 1200, vec!["s0", "s1", "s2"], set_step);
    run_model(4, true, 1200, vec!["s0", "s1"], set_step);
}

#[test]
fn sorted_sets_match_the_model() {
    run_model(5, false, 1500, vec!["z0", "z1", "z2"], zset_step);
    run_model(6, true, 1500, vec!["z0", "z1"], zset_step);
}

/// Whole-key commands (RENAME, COPY, DUMP/RESTORE) among every type's
/// steps, with strings and hashes: collections big enough to be dropped
/// by range deletes are renamed and copied, deadlines travel with them,
/// and the records stay exact (no element of an old name or version
/// left, counts right).
#[test]
fn whole_key_commands_match_the_model() {
    for (seed, resp3) in [(8, false), (9, true)] {
        let mut h = Harness::new(seed, resp3, vec!["k0", "k1", "k2"]);
        for i in 0..1600 {
            match i % 4 {
                0 => list_step(&mut h, i),
                1 => set_step(&mut h, i),
                2 => zset_step(&mut h, i),
                _ => keys_step(&mut h, i),
            }
            if i % 25 == 24 {
                h.compare_all();
            }
        }
        h.restart();
        h.compare_all();
        h.server.take().unwrap().stop().unwrap();
        check_records(h.dir.path());
    }
}

/// Every type under the same keys: commands of one type meet keys of
/// another (WRONGTYPE), and *STORE overwrites whatever is there.
#[test]
fn mixed_types_match_the_model() {
    let mut h = Harness::new(7, false, vec!["k0", "k1", "k2"]);
    for i in 0..1500 {
        match i % 3 {
            0 => list_step(&mut h, i),
            1 => set_step(&mut h, i),
            _ => zset_step(&mut h, i),
        }
        if i % 25 == 24 {
            h.compare_all();
        }
    }
    h.restart();
    h.compare_all();
    h.server.take().unwrap().stop().unwrap();
    check_records(h.dir.path());
}

/// RENAME and COPY of collections big enough to be dropped by range
/// deletes (a list trimmed by range deletes first), with deadlines: the
/// contents, TTLs, DBSIZE and INFO's expires are right after each, and
/// the records on disk hold no element of an old name or version.
#[test]
fn rename_and_copy_move_big_collections_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (server, mut con) = start(dir.path(), false);
    let q = |con: &mut redis::Connection, args: &[&str]| -> R {
        let mut c = redis::cmd(args[0]);
        for x in &args[1..] {
            c.arg(*x);
        }
        norm(c.query::<Value>(con))
    };
    let n = 2000;
    let items: Vec<String> = (0..n).map(|i| format!("e{i:05}")).collect();
    let mut push = vec!["RPUSH", "list"];
    push.extend(items.iter().map(|s| s.as_str()));
    q(&mut con, &push);
    // Range deletes inside the list's own range before it moves.
    assert_eq!(q(&mut con, &["LTRIM", "list", "500", "-501"]), R::Ok);
    let mut sadd = vec!["SADD", "set"];
    sadd.extend(items.iter().map(|s| s.as_str()));
    q(&mut con, &sadd);
    let mut zadd = vec!["ZADD", "zset"];
    let scores: Vec<String> = (0..n).map(|i| (i % 97).to_string()).collect();
    for (s, m) in scores.iter().zip(&items) {
        zadd.push(s);
        zadd.push(m);
    }
    q(&mut con, &zadd);
    let mut hset = vec!["HSET", "hash"];
    for m in &items {
        hset.push(m);
        hset.push(m);
    }
    q(&mut con, &hset);
    for k in ["list", "set", "zset", "hash"] {
        assert_eq!(q(&mut con, &["EXPIRE", k, "1000"]), R::Int(1));
    }
    let snapshot = |con: &mut redis::Connection, k: &str| -> Vec<R> {
        vec![
            q(con, &["LRANGE", k, "0", "-1"]),
            sorted(q(con, &["SMEMBERS", k])),
            q(con, &["ZRANGE", k, "0", "-1", "WITHSCORES"]),
            q(con, &["HGETALL", k]),
        ]
    };
    let before: Vec<Vec<R>> = ["list", "set", "zset", "hash"]
        .iter()
        .map(|k| snapshot(&mut con, k))
        .collect();
    // Over an existing key of another type, then copied, then copied over.
    q(&mut con, &["SADD", "list2", "x"]);
    q(&mut con, &["SET", "other", "x"]);
    for (i, k) in ["list", "set", "zset", "hash"].iter().enumerate() {
        let k2 = format!("{k}2");
        let k3 = format!("{k}3");
        assert_eq!(q(&mut con, &["RENAME", k, &k2]), R::Ok);
        assert_eq!(q(&mut con, &["EXISTS", k]), R::Int(0));
        assert_eq!(snapshot(&mut con, &k2), before[i], "{k2}");
        assert!(matches!(q(&mut con, &["TTL", &k2]), R::Int(t) if t > 990));
        assert_eq!(q(&mut con, &["COPY", &k2, &k3]), R::Int(1));
        assert_eq!(q(&mut con, &["COPY", &k2, &k3]), R::Int(0));
        assert_eq!(q(&mut con, &["COPY", &k2, "other", "REPLACE"]), R::Int(1));
        assert_eq!(snapshot(&mut con, &k3), before[i], "{k3}");
        assert!(matches!(q(&mut con, &["TTL", &k3]), R::Int(t) if t > 990));
    }
    // 4 renamed, 4 copies, `other` (last copied from hash2).
    assert_eq!(q(&mut con, &["DBSIZE"]), R::Int(9));
    let R::Str(info) = q(&mut con, &["INFO", "keyspace"]) else {
        panic!("INFO");
    };
    assert!(info.contains("db0:keys=9,expires=9,"), "{info}");
    server.stop().unwrap();
    check_records(dir.path());
}
