//! Lists, sets and sorted sets side by side with a real `redis-server` 7
//! (`/usr/bin/redis-server`, no persistence, a free loopback port): one
//! fixed script of commands, normal and erroneous, sent to both over RESP2
//! and again over RESP3, every reply compared exactly (type, shape, bytes,
//! error words). Replies whose order Redis leaves to its hash tables are
//! compared sorted; random picks are compared by shape.

// A test (or benchmark) fails by panicking: its unwraps are its assertions.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Raw, TestServer, V};

struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start() -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server 7 must be installed (scripts/test-packages)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        RedisServer { child, port }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a reply is compared.
#[derive(Clone, Copy, PartialEq)]
enum Cmp {
    Exact,
    /// Arrays (and sets) sorted first, at every level.
    Sorted,
    /// Only the shape: types and lengths, no contents.
    Shape,
}

fn sorted(v: V) -> V {
    match v {
        V::Array(mut a) => {
            a = a.into_iter().map(sorted).collect();
            a.sort_by_key(|x| format!("{x:?}"));
            V::Array(a)
        }
        V::Set(mut a) => {
            a = a.into_iter().map(sorted).collect();
            a.sort_by_key(|x| format!("{x:?}"));
            V::Set(a)
        }
        v => v,
    }
}

fn shape(v: V) -> V {
    match v {
        V::Bulk(_) => V::Bulk(Vec::new()),
        V::Double(_) => V::Double(String::new()),
        V::Array(a) => V::Array(a.into_iter().map(shape).collect()),
        V::Set(a) => V::Set(a.into_iter().map(shape).collect()),
        v => v,
    }
}

/// The script: one command per line; a leading `^` compares sorted, a
/// leading `~` compares shapes.
const SCRIPT: &str = r#"
RPUSH l a b c d e
LPUSH l z y
LPUSHX nolist a
RPUSHX l f
LLEN l
LRANGE l 0 -1
LRANGE l -3 100
LRANGE l 5 2
LRANGE l x 1
LINDEX l 0
LINDEX l -1
LINDEX l 99
LINDEX l notint
LSET l 1 Y
LSET l 100 q
LSET nolist 0 q
LINSERT l BEFORE c bb
LINSERT l AFTER f g
LINSERT l AFTER nope q
LINSERT l MIDDLE c q
LINSERT nolist BEFORE a b
LRANGE l 0 -1
RPUSH l a a b a
LREM l 2 a
LREM l -1 a
LREM l 0 b
LRANGE l 0 -1
LPOS l c
LPOS l a RANK -1
LPOS l a COUNT 0
LPOS l zz
LPOS l a COUNT 0 MAXLEN 3
LPOS l a RANK 0
LPOS l a COUNT -1
LPOS l a MAXLEN -1
LPOS l a BOGUS 1
LPOS nolist a COUNT 2
LPOP l
RPOP l
LPOP l 2
RPOP l 2
LPOP l 0
LPOP l -1
LPOP l x
LPOP nolist
LPOP nolist 2
RPOP nolist 2
LPOP l 1 2
LTRIM l 1 -2
LRANGE l 0 -1
LTRIM l 5 1
EXISTS l
RPUSH l 1 2 3 4 5
LMOVE l l2 LEFT RIGHT
LMOVE l l2 RIGHT LEFT
LMOVE l l LEFT RIGHT
LMOVE l l2 UP DOWN
LMOVE nolist l2 LEFT LEFT
RPOPLPUSH l l2
LRANGE l 0 -1
LRANGE l2 0 -1
LMPOP 2 nolist l LEFT
LMPOP 2 nolist l2 RIGHT COUNT 10
LMPOP 1 nolist LEFT
LMPOP 0 l LEFT
LMPOP 3 l LEFT
LMPOP 1 l MIDDLE
LMPOP 1 l LEFT COUNT 0
LMPOP 1 l LEFT COUNT 1 COUNT 2
EXISTS l2
TYPE l
SET str v
LPUSH str a
LRANGE str 0 -1
LLEN str
LPOP str
RPOPLPUSH l str
RPOPLPUSH str l
SADD s a b c d
SADD s a e
SREM s a x
SREM nos a
SCARD s
^SMEMBERS s
SISMEMBER s b
SISMEMBER s x
SMISMEMBER s a b x
SMISMEMBER nos a
SADD s2 c d x y
^SINTER s s2
^SUNION s s2
^SDIFF s s2
^SINTER s nos
^SDIFF nos s
SINTERSTORE dst s s2
^SMEMBERS dst
SUNIONSTORE dst s s2
SDIFFSTORE dst s s2
SINTERSTORE dst s nos
EXISTS dst
SINTERCARD 2 s s2
SINTERCARD 2 s s2 LIMIT 1
SINTERCARD 0 s
SINTERCARD 3 s s2
SINTERCARD 1 s LIMIT -1
SMOVE s s2 b
SMOVE s s2 nope
SMOVE nos s2 b
SMOVE s s b
SMOVE s str b
SADD str a
SMEMBERS str
SINTER s str
~SRANDMEMBER s
~SRANDMEMBER s 2
~SRANDMEMBER s -5
SRANDMEMBER s 0
SRANDMEMBER nos
SRANDMEMBER nos 3
SRANDMEMBER s 1 2
SADD one only
SPOP one
SPOP one
SPOP nos
SPOP nos 2
SPOP s -1
^SPOP s2 100
EXISTS s2
SPOP s 0
TYPE s
^SSCAN s 0
^SSCAN s 0 MATCH c*
SSCAN nos 0
ZADD z 1 a 2 b 3 c
ZADD z 1.5 a
ZADD z CH 1.5 a 9 b 4 d
ZADD z NX 100 a 5 e
ZADD z XX 100 a 5 f
ZADD z GT 0 a
ZADD z LT 0 a
ZADD z GT CH 50 c
ZADD z INCR 2 a
ZADD z INCR NX 2 a
ZADD z XX INCR 1 nope
ZADD z NX XX 1 a
ZADD z GT LT 1 a
ZADD z INCR 1 a 2 b
ZADD z 1 a 2
ZADD z x a
ZADD z nan a
ZADD z -inf lo +inf hi
ZADD z -0 zero
ZADD nz XX 1 a
EXISTS nz
ZINCRBY z 1.1 a
ZINCRBY z 1 new
ZINCRBY z x a
ZINCRBY z +inf hi
ZINCRBY z -inf hi
ZSCORE z a
ZSCORE z zero
ZSCORE z hi
ZSCORE z nope
ZSCORE nz a
ZMSCORE z a nope b
ZMSCORE nz a b
ZCARD z
ZCOUNT z -inf +inf
ZCOUNT z (1 5
ZCOUNT z 5 (1
ZCOUNT z x 1
ZRANGE z 0 -1
ZRANGE z 0 -1 WITHSCORES
ZRANGE z 2 4 REV WITHSCORES
ZRANGE z -2 -1
ZRANGE z (1 10 BYSCORE WITHSCORES
ZRANGE z 10 (1 BYSCORE REV
ZRANGE z -inf +inf BYSCORE LIMIT 1 2
ZRANGE z -inf +inf BYSCORE LIMIT -1 2
ZRANGE z -inf +inf BYSCORE LIMIT 0 0
ZRANGE z -inf +inf BYSCORE LIMIT 1 -1
ZRANGEBYLEX z - + LIMIT 0 0
ZRANGE z -inf +inf BYSCORE REV LIMIT 0 3 WITHSCORES
ZRANGE z 0 -1 LIMIT 0 1
ZRANGE z - + BYLEX WITHSCORES
ZRANGE z x y
ZRANGE z 0 1 BYSCORE BYLEX
ZRANGE z x 1 BYSCORE
ZRANGEBYSCORE z 1 5
ZRANGEBYSCORE z -inf +inf WITHSCORES LIMIT 2 3
ZRANGEBYSCORE z 1 5 REV
ZREVRANGEBYSCORE z 5 1 WITHSCORES
ZREVRANGE z 0 2 WITHSCORES
ZREVRANGE z 0 2 BYSCORE
ZRANK z a
ZRANK z hi
ZRANK z nope
ZREVRANK z a
ZREVRANK nz a
ZREM z nope lo
ZREM nz a
ZADD lex 0 a 0 b 0 c 0 d 0 e 0 f
ZRANGEBYLEX lex - +
ZRANGEBYLEX lex [b (e
ZRANGEBYLEX lex (b [e LIMIT 1 2
ZREVRANGEBYLEX lex + -
ZREVRANGEBYLEX lex [e (b
ZRANGEBYLEX lex b e
ZRANGEBYLEX lex + -
ZLEXCOUNT lex [b [d
ZLEXCOUNT lex - +
ZLEXCOUNT lex a b
ZRANGE lex [c + BYLEX REV
ZRANGE lex + [c BYLEX REV LIMIT 0 2
ZRANGESTORE zs z 0 2
ZRANGE zs 0 -1 WITHSCORES
ZRANGESTORE zs z 5 1 BYSCORE REV
ZRANGESTORE zs z 0 -1 WITHSCORES
ZRANGESTORE zs nz 0 -1
EXISTS zs
ZREMRANGEBYRANK lex 0 1
ZREMRANGEBYLEX lex [e +
ZRANGE lex 0 -1
ZREMRANGEBYSCORE z (5 +inf
ZREMRANGEBYSCORE z x 1
ZRANGE z 0 -1 WITHSCORES
ZPOPMIN z
ZPOPMAX z
ZPOPMIN z 2
ZPOPMAX z 0
ZPOPMIN z -1
ZPOPMIN nz
ZPOPMIN nz 2
ZPOPMIN z 1 2
ZADD z 1 a 2 b 3 c
ZMPOP 2 nz z MIN
ZMPOP 1 z MAX COUNT 5
ZMPOP 1 z MAX
ZMPOP 0 z MIN
ZMPOP 1 z MIDDLE
ZMPOP 1 z MIN COUNT 0
EXISTS z
ZADD z1 1 a 2 b 3 c
ZADD z2 10 b 20 c 30 d
SADD sz b x
ZUNION 2 z1 z2 WITHSCORES
ZUNION 2 z1 z2 WEIGHTS 2 3 AGGREGATE MAX WITHSCORES
ZINTER 2 z1 z2 WITHSCORES
ZINTER 2 z1 z2 AGGREGATE MIN
ZINTER 3 z1 z2 sz WITHSCORES
ZDIFF 2 z1 z2 WITHSCORES
ZDIFF 2 z1 z2 WEIGHTS 1 1
ZUNION 0 z1
ZUNION 3 z1 z2
ZUNION 2 z1 z2 WEIGHTS 1 x
ZUNION 2 z1 z2 AGGREGATE AVG
ZUNION 2 z1 str
ZUNIONSTORE zu 2 z1 z2 WEIGHTS 1 -1
ZRANGE zu 0 -1 WITHSCORES
ZINTERSTORE zu 2 z1 z2
ZDIFFSTORE zu 2 z1 z2
ZRANGE zu 0 -1 WITHSCORES
ZINTERSTORE zu 2 z1 nz
EXISTS zu
ZUNIONSTORE zu 1 z1 WITHSCORES
ZINTERCARD 2 z1 z2
ZINTERCARD 2 z1 z2 LIMIT 1
ZINTERCARD 0 z1
ZINTERCARD 1 z1 LIMIT -1
~ZRANDMEMBER z1
~ZRANDMEMBER z1 2 WITHSCORES
~ZRANDMEMBER z1 -4
ZRANDMEMBER nz
ZRANDMEMBER nz 2
ZRANDMEMBER z1 0
ZRANDMEMBER z1 2 NOSCORES
ZSCAN z1 0
ZSCAN z1 0 MATCH a*
ZSCAN nz 0
ZADD str 1 a
ZRANGE str 0 -1
ZSCORE str a
ZUNIONSTORE str 1 z1
TYPE str
TYPE z1
TYPE sz
TYPE l2
^SCAN 0 TYPE list COUNT 1000
^SCAN 0 TYPE set COUNT 1000
^SCAN 0 TYPE zset COUNT 1000
^SCAN 0 TYPE hash COUNT 1000
^KEYS *
^KEYS z*
EXISTS z1 sz l2 nope z1
DBSIZE
DEL z1 sz nope
UNLINK z2 nope
EXISTS z1 sz z2
EXPIRE lex 100
TTL lex
PERSIST lex
TTL lex
PEXPIRE lex 0
EXISTS lex
TYPE lex
SADD big x1 x2 x3 x4 x5 x6 x7 x8 x9 x10 x11 x12 x13 x14 x15 x16 x17 x18 x19 x20
EXPIRE big 100
SET big now-a-string
TTL big
TYPE big
DBSIZE
FLUSHDB
DBSIZE
EXISTS l2 zs dst
LRANGE l2 0 -1
"#;

/// Transactions and databases: `MULTI`/`EXEC`/`DISCARD`, `EXECABORT`,
/// `WATCH` against a second client's write (lines starting `2 ` run on a
/// second connection to each server), `SELECT`, `MOVE`, `FLUSHDB`,
/// `FLUSHALL`.
const TX_SCRIPT: &str = r#"
SET k v
MULTI
SET k v2
INCR n
INCR n
LPUSH q a
LPUSH q b
LRANGE q 0 -1
GET k
EXEC
LRANGE q 0 -1
MULTI
INCR k
SET x 1
EXEC
MULTI
NOSUCH a
SET x 2
EXEC
GET x
MULTI
SET x
EXEC
MULTI
MULTI
WATCH k
DISCARD
DISCARD
EXEC
MULTI
SAVE
SET x 3
EXEC
GET x
WATCH k
2 SET k other
MULTI
SET k mine
EXEC
GET k
WATCH k
MULTI
SET k mine
EXEC
WATCH k n
2 GET k
UNWATCH
2 SET k theirs
MULTI
INCR n
EXEC
WATCH k
SET k self
MULTI
INCR n
EXEC
MULTI
SELECT 3
SET k three
DBSIZE
SELECT 99
EXEC
GET k
SELECT 0
GET k
DBSIZE
SELECT 16
SELECT -1
SELECT x
MOVE k 3
MOVE n 3
MOVE n 0
MOVE n 99
MOVE n x
MOVE nosuch 3
SELECT 3
GET n
DBSIZE
FLUSHDB
DBSIZE
SET a 1
SELECT 0
DBSIZE
FLUSHALL
DBSIZE
SELECT 3
DBSIZE
SELECT 0
"#;

fn run_script(weft: &mut Raw, redis: &mut Raw, proto: &str) {
    run_lines(SCRIPT, weft, redis, None, proto);
}

/// Runs `script` on both servers (`second`: the second connections, for
/// lines starting `2 `), comparing every reply.
fn run_lines(
    script: &str,
    weft: &mut Raw,
    redis: &mut Raw,
    mut second: Option<(&mut Raw, &mut Raw)>,
    proto: &str,
) {
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (cmp, line) = match line.as_bytes()[0] {
            b'^' => (Cmp::Sorted, &line[1..]),
            b'~' => (Cmp::Shape, &line[1..]),
            _ => (Cmp::Exact, line),
        };
        let (args, on_second): (Vec<&str>, bool) = match line.strip_prefix("2 ") {
            Some(rest) => (rest.split_whitespace().collect(), true),
            None => (line.split_whitespace().collect(), false),
        };
        let (w, r) = match (&mut second, on_second) {
            (Some((w2, r2)), true) => (w2.cmd(&args), r2.cmd(&args)),
            _ => (weft.cmd(&args), redis.cmd(&args)),
        };
        let (w, r) = match cmp {
            Cmp::Exact => (w, r),
            Cmp::Sorted => (sorted(w), sorted(r)),
            Cmp::Shape => (shape(w), shape(r)),
        };
        assert_eq!(w, r, "{proto}: {line}\n weft:  {w:?}\n redis: {r:?}");
    }
}

#[test]
fn lists_sets_and_sorted_sets_reply_as_redis_7_does() {
    let redis = RedisServer::start();
    let weft = TestServer::start();
    for resp3 in [false, true] {
        let mut w = weft.raw();
        let mut r = Raw::connect(([127, 0, 0, 1], redis.port).into());
        for c in [&mut w, &mut r] {
            c.cmd(&["FLUSHALL"]);
            if resp3 {
                c.cmd(&["HELLO", "3"]);
            }
        }
        run_script(&mut w, &mut r, if resp3 { "RESP3" } else { "RESP2" });
    }
}

#[test]
fn transactions_and_databases_reply_as_redis_7_does() {
    let redis = RedisServer::start();
    let weft = TestServer::start();
    for resp3 in [false, true] {
        let mut w = weft.raw();
        let mut r = Raw::connect(([127, 0, 0, 1], redis.port).into());
        let mut w2 = weft.raw();
        let mut r2 = Raw::connect(([127, 0, 0, 1], redis.port).into());
        for c in [&mut w, &mut r] {
            c.cmd(&["FLUSHALL"]);
            if resp3 {
                c.cmd(&["HELLO", "3"]);
            }
        }
        let proto = if resp3 { "RESP3" } else { "RESP2" };
        run_lines(TX_SCRIPT, &mut w, &mut r, Some((&mut w2, &mut r2)), proto);
    }
}
