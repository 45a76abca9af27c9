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
        Self::start_with(&[])
    }

    /// Starts one on a free port. The tests run in parallel: another
    /// test's server may take the port between the pick and the bind, so
    /// a server that exited (it failed to bind) is started again on
    /// another port, and "started" means this child is alive and answers.
    fn start_with(extra: &[&str]) -> RedisServer {
        for _ in 0..20 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new("redis-server")
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
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server 7 must be installed (scripts/test-packages)");
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if child.try_wait().unwrap().is_some() {
                    break; // exited: the port was taken
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    std::thread::sleep(Duration::from_millis(50));
                    if child.try_wait().unwrap().is_none() {
                        return RedisServer { child, port };
                    }
                    break;
                }
                assert!(Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("redis-server did not start on any of 20 free ports");
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
RPUSH bl1 a b c
BLPOP nokey bl1 0
BRPOP bl1 0
BLPOP nokey 0.01
BRPOP nokey nokey2 0.01
BLPOP nokey 0.0001
BLPOP nokey -1
BLPOP nokey abc
BLPOP nokey inf
BLPOP nokey -inf
BLPOP nokey nan
BLPOP nokey 1e30
BLPOP onlykey
SET bstr x
BLPOP bstr 0
BLPOP nokey bstr 0
BLPOP bl1 bstr 0
BRPOP bstr bl1 0
RPUSH bl2 x y z
BLMOVE bl2 bl3 LEFT RIGHT 0
BLMOVE bl2 bl3 RIGHT RIGHT 0.5
BLMOVE bl2 bstr LEFT RIGHT 0
BLMOVE bstr bl3 LEFT RIGHT 0
BLMOVE nokey bl3 LEFT RIGHT 0.01
BLMOVE nokey bstr LEFT RIGHT 0.01
BLMOVE bl2 bl3 UP RIGHT 0
BLMOVE bl2 bl3 LEFT DOWN 0
BLMOVE bl2 bl3 LEFT RIGHT -1
BLMOVE bl2 bl3 LEFT RIGHT x
BLMOVE bl2 bl3 LEFT 0
BRPOPLPUSH bl2 bl3 0
BRPOPLPUSH nokey bl3 0.01
BRPOPLPUSH bstr bl3 0
BRPOPLPUSH bl3 bl3 0
BRPOPLPUSH bl3 bl3 -5
LRANGE bl3 0 -1
RPUSH bl4 1 2 3 4 5
BLMPOP 0 2 nokey bl4 LEFT COUNT 2
BLMPOP 0 1 bl4 RIGHT
BLMPOP 0 1 bl4 RIGHT COUNT 100
BLMPOP 0.01 1 nokey LEFT
BLMPOP 0.01 2 nokey bl4 LEFT COUNT 3
BLMPOP 0 0 bl4 LEFT
BLMPOP 0 -1 bl4 LEFT
BLMPOP 0 3 bl4 LEFT
BLMPOP 0 1 bl4 UP
BLMPOP 0 1 bl4 LEFT COUNT 0
BLMPOP 0 1 bl4 LEFT COUNT x
BLMPOP 0 1 bl4 LEFT COUNT 1 COUNT 1
BLMPOP 0 1 bl4 LEFT EXTRA
BLMPOP -1 1 bl4 LEFT
BLMPOP x 1 bl4 LEFT
BLMPOP -1 0 bl4 LEFT
BLMPOP 0 1 bstr LEFT
BLMPOP 0 1 bl4
ZADD bz 1 a 2 b 3 c 4 d
BZPOPMIN bz 0
BZPOPMAX nokey bz 0
BZPOPMIN nokey 0.01
BZPOPMAX nokey nokey2 0.01
BZPOPMIN bstr 0
BZPOPMIN bl3 0
BZPOPMIN nokey bstr 0
BZPOPMIN bz -2
BZPOPMIN bz none
BLPOP bz 0
BZMPOP 0 1 bz MIN COUNT 1
BZMPOP 0 2 nokey bz MAX COUNT 5
BZMPOP 0.01 1 bz MAX
BZMPOP 0 1 bz MIDDLE
BZMPOP 0 0 bz MIN
BZMPOP 0 1 bz MIN COUNT 0
BZMPOP 0 1 bz MIN COUNT 2 junk
BZMPOP -1 1 bz MIN
BZMPOP 0 1 bstr MIN
BZMPOP 0 1 bl3 MAX
EXISTS bz bl1 bl2 bl4
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

/// Strings, hashes and keys (issue 40, part 2): every new command, its
/// options and its errors.
const SCRIPT_KEYS: &str = r#"
SETEX sx 100 v
TTL sx
GET sx
SETEX sx 0 v
SETEX sx -1 v
SETEX sx x v
SETEX sx 100
PSETEX px 100000 v
TTL px
PSETEX px 0 v
PSETEX px x v
SET g1 hello
GETEX g1
GETEX g1 EX 100
TTL g1
GETEX g1 PERSIST
TTL g1
GETEX g1 PX 5000
TTL g1
GETEX g1 EXAT 4102444800
EXPIRETIME g1
GETEX g1 PXAT 4102444800123
PEXPIRETIME g1
GETEX g1 PX 5000 EX 10
GETEX g1 EX 10 PERSIST
GETEX g1 PERSIST PERSIST
GETEX g1 EX 10 EX 20
TTL g1
GETEX g1 EX 0
GETEX g1 EX x
GETEX g1 EX
GETEX g1 FOO
GETEX nokey EX 0
GETEX nokey
RPUSH glist a b
GETEX glist
GETEX g1 EXAT 1
EXISTS g1
GETEX
SET gd v
GETDEL gd
GETDEL gd
EXISTS gd
GETDEL glist
GETDEL
SET f 10.5
INCRBYFLOAT f 0.1
INCRBYFLOAT f -5
INCRBYFLOAT f abc
INCRBYFLOAT f inf
INCRBYFLOAT f nan
INCRBYFLOAT f " 1"
INCRBYFLOAT newf 3
INCRBYFLOAT newf 0.0000001
INCRBYFLOAT newf +1.5
INCRBYFLOAT newf .5
INCRBYFLOAT newf 5.
INCRBYFLOAT newf -12.0000001
SET g 0.1
INCRBYFLOAT g 0.2
SET h3 3.0e3
INCRBYFLOAT h3 1
SET n -1.5
INCRBYFLOAT n 1.5
SET notf abc
INCRBYFLOAT notf 1
INCRBYFLOAT glist 1
INCRBYFLOAT f
SET sr Hello
SETRANGE sr 6 World
GET sr
SETRANGE sr 1 x
GET sr
SETRANGE sr -1 x
SETRANGE sr x x
SETRANGE nosr 3 ab
GET nosr
STRLEN nosr
SETRANGE glist 0 a
SETRANGE sr 536870911 ab
SETEX srt 100 abc
SETRANGE srt 1 X
TTL srt
GET srt
MSETNX m1 a m2 b
MSETNX m2 x m3 y
MGET m1 m2 m3
MSETNX m3 a m3 b
GET m3
MSETNX m4 a m5
MSETNX glist a
SETBIT b 7 1
SETBIT b 7 0
SETBIT b 7 1
SETBIT b 100 1
GETBIT b 100
GETBIT b 7
GETBIT b 6
GETBIT b 1000
GETBIT nob 3
GET b
STRLEN b
SETBIT b -1 1
SETBIT b 1 2
SETBIT b 1 -1
SETBIT b x 1
SETBIT b 4294967296 1
GETBIT b 4294967296
GETBIT b x
GETBIT glist 0
SETBIT glist 0 1
SET bc foobar
BITCOUNT bc
BITCOUNT bc 0 0
BITCOUNT bc 1 1
BITCOUNT bc 1 -2
BITCOUNT bc 5 30 BIT
BITCOUNT bc -5 -1 BIT
BITCOUNT bc 0 -1 BYTE
BITCOUNT bc 0 -1 bogus
BITCOUNT bc 0
BITCOUNT bc -1 -5
BITCOUNT bc -1 -5 bogus
BITCOUNT bc 3 100
BITCOUNT bc x 1
BITCOUNT nobc
BITCOUNT nobc x
BITCOUNT glist
SET bp abc
BITPOS bp 1
BITPOS bp 0
BITPOS bp 1 1
BITPOS bp 0 1 2
BITPOS bp 1 7 15 BIT
BITPOS bp 1 9 15 BIT
BITPOS bp 0 0 -1 BIT
BITPOS bp 0 1 1 BIT
BITPOS bp 1 2 1
BITPOS bp 1 -1
BITPOS bp 0 -100 100
BITPOS bp 2
BITPOS bp x
BITPOS nobp 0
BITPOS nobp 1
BITPOS bp 1 0 0 BOGUS
BITPOS bp 1 x
BITPOS bp 1 0 x
BITPOS bp 1 0 0 BIT extra
BITPOS glist 1
SET ffs ÿÿÿ
BITPOS ffs 0
BITPOS ffs 0 1
BITPOS ffs 0 0 -1
BITPOS ffs 0 0 5 BIT
BITPOS ffs 1 3
BITPOS ffs 0 8 BIT
SET zeros ""
SETBIT zz 23 0
BITPOS zz 0
BITPOS zz 1
BITPOS zz 0 1 1
BITPOS zz 1 1 1
BITCOUNT zz
SUBSTR sr 0 4
SUBSTR sr -3 -1
SUBSTR sr x 1
SUBSTR nosr2 0 1
SUBSTR glist 0 1
SET lcs1 ohmytext
SET lcs2 mynewtext
LCS lcs1 lcs2
LCS lcs1 lcs2 LEN
LCS lcs1 lcs2 IDX
LCS lcs1 lcs2 IDX MINMATCHLEN 4
LCS lcs1 lcs2 IDX MINMATCHLEN 4 WITHMATCHLEN
LCS lcs1 lcs2 IDX WITHMATCHLEN
LCS lcs1 lcs2 IDX MINMATCHLEN -3
LCS lcs1 lcs2 LEN IDX
LCS lcs1 lcs2 MINMATCHLEN
LCS lcs1 lcs2 MINMATCHLEN x
LCS lcs1 glist
LCS lcs1 nolcs
LCS nolcs nolcs2 IDX
LCS lcs1 lcs2 BOGUS
LCS lcs1
APPEND sr !!
GETRANGE sr 0 -1
HSET h a 1 b 2.5 c hello
HSTRLEN h c
HSTRLEN h zz
HSTRLEN noh a
HSTRLEN glist a
HSTRLEN h
HINCRBYFLOAT h b 0.5
HINCRBYFLOAT h a 1.5
HINCRBYFLOAT h new 10
HINCRBYFLOAT h c 1
HINCRBYFLOAT h a x
HINCRBYFLOAT h a inf
HINCRBYFLOAT h a -inf
HINCRBYFLOAT noh2 x 1.25
HGETALL noh2
HINCRBYFLOAT glist a 1
HINCRBYFLOAT h a
^HGETALL h
~HRANDFIELD h
HRANDFIELD noh
HRANDFIELD noh 3
HRANDFIELD noh 3 WITHVALUES
HRANDFIELD h 0
HRANDFIELD h 0 WITHVALUES
^HRANDFIELD h 10
^HRANDFIELD h 10 WITHVALUES
^HRANDFIELD h 4 WITHVALUES
~HRANDFIELD h 2
~HRANDFIELD h -3
~HRANDFIELD h -3 WITHVALUES
HRANDFIELD h 1 WITHSCORES
HRANDFIELD h x
HRANDFIELD h 1 WITHVALUES extra
HRANDFIELD h -9223372036854775807 WITHVALUES
HRANDFIELD h -9223372036854775808
HRANDFIELD glist
HRANDFIELD glist 1
HSETNX h a 9
HSETNX h z 9
HMGET h a zz c
HEXISTS h a
HEXISTS h zz
HLEN h
^HKEYS h
^HVALS h
HINCRBY h z 5
HGET h z
RENAME sr sr2
GET sr2
EXISTS sr
RENAME nosuch x
RENAMENX nosuch x
RENAME sr2 sr2
RENAMENX sr2 sr2
RENAME h h2
^HGETALL h2
EXISTS h
RENAMENX sr2 h2
RENAMENX sr2 sr3
GET sr3
SETEX ttlkey 100 v
RENAME ttlkey ttl2
TTL ttl2
RENAME glist h2
TYPE h2
LRANGE h2 0 -1
RENAME h2 glist
RENAME a
COPY sr3 c1
GET c1
COPY sr3 c1
COPY sr3 c1 REPLACE
COPY sr3 sr3
COPY nosuch c2
COPY sr3 c1 DB 0 REPLACE
COPY sr3 c1 DB 99
COPY sr3 c1 DB x
COPY sr3 c1 DB
COPY sr3 c1 BOGUS
COPY ttl2 c3
TTL c3
ZADD cz 1 a 2 b
COPY cz cz2
ZRANGE cz2 0 -1 WITHSCORES
SADD cs 1 2 3
COPY cs cs2
^SMEMBERS cs2
COPY glist cl
LRANGE cl 0 -1
COPY cz cl
COPY cz cl REPLACE
TYPE cl
COPY sr3
TOUCH sr3 nosuch sr3
TOUCH nosuch
EXPIREAT sr3 4102444800
EXPIRETIME sr3
PEXPIRETIME sr3
TTL sr3
PEXPIREAT sr3 4102444800123
PEXPIRETIME sr3
EXPIRETIME sr3
EXPIRETIME nosuch
PEXPIRETIME nosuch
EXPIRETIME cz
PEXPIRETIME cz
EXPIREAT cz 1
EXISTS cz
PEXPIREAT cz2 1
EXISTS cz2
EXPIREAT sr3 x
EXPIREAT sr3 100 NX
EXPIREAT sr3 4102444900 GT
EXPIRETIME sr3
EXPIREAT sr3 4102444700 GT
EXPIREAT sr3 4102444700 LT
EXPIREAT sr3 4102444900 BOGUS
EXPIREAT sr3 4102444900 NX XX
EXPIREAT nosuch 4102444900
EXPIREAT sr3 9223372036854775807
PEXPIREAT sr3 9223372036854775807
EXPIREAT sr3
SET enc1 12345
SET enc2 hello
SET enc3 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
SET enc4 42
SET enc5 -9223372036854775808
SET enc6 0123
OBJECT ENCODING enc1
OBJECT ENCODING enc2
OBJECT ENCODING enc3
OBJECT ENCODING enc4
OBJECT ENCODING enc5
OBJECT ENCODING enc6
RPUSH encl a
OBJECT ENCODING encl
SADD encs 1 2 3
OBJECT ENCODING encs
SADD encs2 a 1
OBJECT ENCODING encs2
ZADD encz 1 a
OBJECT ENCODING encz
ZADD encz2 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
OBJECT ENCODING encz2
HSET ench a b
OBJECT ENCODING ench
HSET ench2 a aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
OBJECT ENCODING ench2
OBJECT ENCODING nosuch
OBJECT FREQ enc1
OBJECT FREQ nosuch
OBJECT IDLETIME enc1
OBJECT IDLETIME nosuch
OBJECT REFCOUNT enc1
OBJECT REFCOUNT enc2
OBJECT REFCOUNT enc4
OBJECT REFCOUNT encl
OBJECT REFCOUNT nosuch
OBJECT HELP
OBJECT help
OBJECT HELP x
OBJECT BOGUS x
OBJECT ENCODING
OBJECT ENCODING a b
OBJECT
WAIT 0 0
WAIT 1 10
WAIT x 0
WAIT 0 -1
WAIT 0 x
WAIT 0
~RANDOMKEY
RANDOMKEY x
DUMP nosuch
DUMP enc2
DUMP enc1
DUMP enc4
DUMP enc5
DUMP
RESTORE rk 0 bad
RESTORE enc2 0 xxxxxxxxxxxx
RESTORE rk -1 xxxxxxxxxxxxxx
RESTORE rk x xxxxxxxxxxxxxx
RESTORE rk 0 xxxxxxxxxxxxxxxx
RESTORE rk 0 xxxxxxxxxxxxxxxx IDLETIME -1
RESTORE rk 0 xxxxxxxxxxxxxxxx IDLETIME x
RESTORE rk 0 xxxxxxxxxxxx FREQ 256
RESTORE rk 0 xxxxxxxxxxxx FREQ -1
RESTORE rk 0 xxxxxxxxxx IDLETIME 1 FREQ 1
RESTORE rk 0 xxxxxxxxxx FREQ 1 IDLETIME 1
RESTORE rk 0 xxxxxxxxxx IDLETIME
RESTORE rk 0 xxxxxxxxxxxxxx BOGUS
RESTORE rk 0 xxxxxxxxxxxxxx REPLACE ABSTTL IDLETIME 5
RESTORE rk 0
SCAN abc
SCAN 99999999999999999999
SCAN 1.5
SCAN " 1"
HSCAN h x
SSCAN cs 1.5
MIGRATE 127.0.0.1 1 nosuch 0 100
MIGRATE 127.0.0.1 1 enc2 0 100 BOGUS
MIGRATE 127.0.0.1 1 enc2 0 100 AUTH
MIGRATE 127.0.0.1 1 enc2 0 100 AUTH2 a
MIGRATE 127.0.0.1 1 enc2 0 100 KEYS a
MIGRATE 127.0.0.1 1 enc2 x 100
MIGRATE 127.0.0.1 1 enc2 0 x
MIGRATE 127.0.0.1 1 enc2 0 100
EXISTS enc2
MIGRATE 127.0.0.1 1 enc2 0
DBSIZE
SET cpa 1
RPUSH cpl a b c
COPY cpa cpa
COPY cpa cpa DB 16
COPY cpa cpa DB -1
COPY cpa cpa DB x
COPY cpa cpa DB 3
COPY cpl cpl DB 3
COPY cpa cpa DB 3
SET cpa 2
COPY cpa cpa DB 3 REPLACE
SELECT 3
GET cpa
LRANGE cpl 0 -1
COPY cpl cpl2 DB 0
SELECT 0
LRANGE cpl2 0 -1
DBSIZE
"#;

fn run_script(weft: &mut Raw, redis: &mut Raw, proto: &str) {
    run_lines(weft, redis, proto, SCRIPT);
}

/// Splits a script line into arguments: on spaces, with `"..."` one
/// argument (possibly empty or holding spaces).
fn split_line(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').unwrap();
            out.push(r[..end].to_string());
            rest = r[end + 1..].trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = rest[end..].trim_start();
        }
    }
    out
}

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

fn run_lines(weft: &mut Raw, redis: &mut Raw, proto: &str, script: &str) {
    run_lines_on(script, weft, redis, None, proto);
}

/// Runs `script` on both servers (on `second`'s connections for the
/// lines starting `2 `), comparing every reply.
fn run_lines_on(
    script: &str,
    weft: &mut Raw,
    redis: &mut Raw,
    mut second: Option<(&mut Raw, &mut Raw)>,
    proto: &str,
) {
    let mut bad = Vec::new();
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (cmp, line) = match line.as_bytes()[0] {
            b'^' => (Cmp::Sorted, &line[1..]),
            b'~' => (Cmp::Shape, &line[1..]),
            _ => (Cmp::Exact, line),
        };
        let (line, on_second) = match line.strip_prefix("2 ") {
            Some(rest) => (rest, true),
            None => (line, false),
        };
        let args = split_line(line);
        let args: Vec<&str> = args.iter().map(|a| a.as_str()).collect();
        let (w, r) = match (&mut second, on_second) {
            (Some((w2, r2)), true) => (w2.cmd(&args), r2.cmd(&args)),
            _ => (weft.cmd(&args), redis.cmd(&args)),
        };
        let (w, r) = match cmp {
            Cmp::Exact => (w, r),
            Cmp::Sorted => (sorted(w), sorted(r)),
            Cmp::Shape => (shape(w), shape(r)),
        };
        if w != r {
            bad.push(format!("{proto}: {line}\n weft:  {w:?}\n redis: {r:?}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} replies differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
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
fn strings_hashes_and_keys_reply_as_redis_7_does() {
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
        run_lines(
            &mut w,
            &mut r,
            if resp3 { "RESP3" } else { "RESP2" },
            SCRIPT_KEYS,
        );
    }
}

/// One command with binary arguments.
fn cmdb(c: &mut Raw, args: &[&[u8]]) -> V {
    c.send_bytes(&Raw::encode(args));
    c.read()
}

fn bulk(v: V) -> Vec<u8> {
    match v {
        V::Bulk(b) => b,
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

/// A key's type and contents in a form both servers reply alike: sets
/// and hashes sorted, sorted sets in rank order with scores, the TTL
/// rounded to whole seconds.
fn contents(c: &mut Raw, key: &str) -> Vec<V> {
    let t = c.cmd(&["TYPE", key]);
    let body = match &t {
        V::Simple(s) if s == "string" => c.cmd(&["GET", key]),
        V::Simple(s) if s == "list" => c.cmd(&["LRANGE", key, "0", "-1"]),
        V::Simple(s) if s == "set" => sorted(c.cmd(&["SMEMBERS", key])),
        V::Simple(s) if s == "zset" => c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        V::Simple(s) if s == "hash" => match c.cmd(&["HGETALL", key]) {
            V::Array(a) => {
                let mut pairs: Vec<(V, V)> =
                    a.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
                pairs.sort_by_key(|p| format!("{p:?}"));
                V::Map(pairs)
            }
            V::Map(mut m) => {
                m.sort_by_key(|p| format!("{p:?}"));
                V::Map(m)
            }
            other => other,
        },
        _ => V::Nil,
    };
    let ttl = c.cmd(&["TTL", key]);
    vec![t, body, ttl]
}

/// Fills `c` (weft or redis) with one key of each type and size.
fn fill(c: &mut Raw) {
    let many = |p: &str, n: usize| -> Vec<String> { (0..n).map(|i| format!("{p}{i}")).collect() };
    let run = |c: &mut Raw, args: Vec<String>| {
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let r = c.cmd(&a);
        assert!(!matches!(r, V::Err(_)), "{a:?}: {r:?}");
    };
    let cmd = |name: &str, key: &str, rest: Vec<String>| {
        let mut v = vec![name.to_string(), key.to_string()];
        v.extend(rest);
        v
    };
    run(c, cmd("SET", "s_text", vec!["hello".into()]));
    run(c, cmd("SET", "s_int8", vec!["-7".into()]));
    run(c, cmd("SET", "s_int16", vec!["12345".into()]));
    run(c, cmd("SET", "s_int32", vec!["-1234567890".into()]));
    run(c, cmd("SET", "s_int64", vec!["9223372036854775807".into()]));
    run(c, cmd("SET", "s_lzf", vec!["abcabcabc".repeat(200)]));
    run(c, cmd("SET", "s_bin", vec!["q\u{1}\u{7f}é✓ zz".into()]));
    run(c, cmd("SETEX", "s_ttl", vec!["1000".into(), "v".into()]));
    run(
        c,
        cmd(
            "RPUSH",
            "l_small",
            vec![
                "a".into(),
                "1".into(),
                "-300".into(),
                "70000".into(),
                "b".into(),
            ],
        ),
    );
    let mut l = many("e", 300);
    l.push("x".repeat(300));
    l.push("12".into());
    run(c, cmd("RPUSH", "l_big", l));
    run(
        c,
        cmd(
            "SADD",
            "set_int",
            vec!["1".into(), "-2".into(), "300".into()],
        ),
    );
    run(
        c,
        cmd(
            "SADD",
            "set_int64",
            vec![
                "1".into(),
                "5000000000".into(),
                "-9223372036854775808".into(),
            ],
        ),
    );
    run(
        c,
        cmd("SADD", "set_str", vec!["a".into(), "b".into(), "1".into()]),
    );
    run(c, cmd("SADD", "set_big", many("m", 600)));
    run(
        c,
        cmd(
            "ZADD",
            "z_small",
            vec![
                "1".into(),
                "a".into(),
                "2.5".into(),
                "b".into(),
                "-inf".into(),
                "lo".into(),
                "inf".into(),
                "hi".into(),
                "3".into(),
                "100".into(),
            ],
        ),
    );
    let mut z = Vec::new();
    for i in 0..200 {
        z.push(format!("{}", i as f64 / 3.0));
        z.push(format!("member{i}"));
    }
    run(c, cmd("ZADD", "z_big", z));
    run(
        c,
        cmd(
            "HSET",
            "h_small",
            vec![
                "f".into(),
                "v".into(),
                "n".into(),
                "42".into(),
                "neg".into(),
                "-5".into(),
            ],
        ),
    );
    let mut h = Vec::new();
    for i in 0..600 {
        h.push(format!("field{i}"));
        h.push(if i % 2 == 0 {
            format!("{i}")
        } else {
            "y".repeat(i % 90)
        });
    }
    run(c, cmd("HSET", "h_big", h));
    run(
        c,
        cmd("HSET", "h_longval", vec!["f".into(), "v".repeat(100)]),
    );
}

const FILLED: [&str; 20] = [
    "s_text",
    "s_int8",
    "s_int16",
    "s_int32",
    "s_int64",
    "s_lzf",
    "s_bin",
    "s_ttl",
    "l_small",
    "l_big",
    "set_int",
    "set_int64",
    "set_str",
    "set_big",
    "z_small",
    "z_big",
    "h_small",
    "h_big",
    "h_longval",
    "l_plain",
];

/// `DUMP` on a real Redis 7, `RESTORE` into Weft, for every type in both
/// its small and its big encodings (forced with Redis's `CONFIG SET`s):
/// the contents and deadlines agree; and back, `DUMP` on Weft, `RESTORE`
/// into Redis.
#[test]
fn dump_and_restore_interoperate_with_redis_7() {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let weft = TestServer::start();
    let mut r = Raw::connect(([127, 0, 0, 1], redis.port).into());
    let mut w = weft.raw();
    let mut encodings = std::collections::BTreeSet::new();
    for big in [false, true] {
        for c in [&mut r, &mut w] {
            c.cmd(&["FLUSHALL"]);
        }
        let conf: &[(&str, &str)] = if big {
            &[
                ("list-max-listpack-size", "4"),
                ("set-max-intset-entries", "0"),
                ("zset-max-listpack-entries", "0"),
                ("hash-max-listpack-entries", "0"),
            ]
        } else {
            &[
                ("list-max-listpack-size", "-2"),
                ("set-max-intset-entries", "512"),
                ("zset-max-listpack-entries", "128"),
                ("hash-max-listpack-entries", "512"),
            ]
        };
        for (k, v) in conf {
            assert_eq!(r.cmd(&["CONFIG", "SET", k, v]), V::Simple("OK".into()));
        }
        // Elements of 100 bytes and more go into plain quicklist nodes.
        let plain_threshold = if big { "100" } else { "1073741824" };
        assert_eq!(
            r.cmd(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", plain_threshold]),
            V::Simple("OK".into())
        );
        fill(&mut r);
        r.cmd(&[
            "RPUSH",
            "l_plain",
            "a",
            &"p".repeat(150),
            "b",
            &"q".repeat(120),
        ]);
        for k in FILLED {
            if let V::Bulk(e) = r.cmd(&["OBJECT", "ENCODING", k]) {
                encodings.insert(String::from_utf8(e).unwrap());
            }
            let payload = bulk(r.cmd(&["DUMP", k]));
            let pttl = match r.cmd(&["PTTL", k]) {
                V::Int(t) if t > 0 => t.to_string(),
                _ => "0".to_string(),
            };
            assert_eq!(
                cmdb(
                    &mut w,
                    &[b"RESTORE", k.as_bytes(), pttl.as_bytes(), &payload]
                ),
                V::Simple("OK".into()),
                "RESTORE {k} (big encodings: {big})"
            );
            assert_eq!(contents(&mut w, k), contents(&mut r, k), "{k} (big: {big})");
            // A second RESTORE needs REPLACE.
            assert_eq!(
                cmdb(&mut w, &[b"RESTORE", k.as_bytes(), b"0", &payload]),
                V::Err("BUSYKEY Target key name already exists.".into())
            );
            assert_eq!(
                cmdb(
                    &mut w,
                    &[b"RESTORE", k.as_bytes(), b"0", &payload, b"REPLACE"]
                ),
                V::Simple("OK".into())
            );
            // Any damage to the payload is refused in Redis's words, by both.
            for at in [0, payload.len() / 2, payload.len() - 9, payload.len() - 1] {
                let mut bad = payload.clone();
                bad[at] ^= 0x20;
                let want = cmdb(&mut r, &[b"RESTORE", b"bad", b"0", &bad]);
                assert_eq!(cmdb(&mut w, &[b"RESTORE", b"bad", b"0", &bad]), want);
                assert_eq!(
                    want,
                    V::Err("ERR DUMP payload version or checksum are wrong".into())
                );
            }
        }
        // Weft's DUMP of everything it now holds restores into Redis as
        // the same contents.
        for k in FILLED {
            let payload = bulk(w.cmd(&["DUMP", k]));
            let copy = format!("{k}_from_weft");
            let pttl = match w.cmd(&["PTTL", k]) {
                V::Int(t) if t > 0 => t.to_string(),
                _ => "0".to_string(),
            };
            assert_eq!(
                cmdb(
                    &mut r,
                    &[b"RESTORE", copy.as_bytes(), pttl.as_bytes(), &payload]
                ),
                V::Simple("OK".into()),
                "redis RESTORE of weft's {k}"
            );
            assert_eq!(
                contents(&mut r, &copy),
                contents(&mut w, k),
                "{k} via weft's DUMP"
            );
        }
    }
    // Both small and big encodings of every type were exercised.
    for e in [
        "int",
        "embstr",
        "raw",
        "quicklist",
        "intset",
        "listpack",
        "hashtable",
        "skiplist",
    ] {
        assert!(
            encodings.contains(e),
            "no key in encoding {e}: {encodings:?}"
        );
    }
}

/// RESTORE's options and refusals, payloads built by hand: a version
/// newer than Redis 7.2's, an empty collection, a truncated object, the
/// deadline (relative, ABSTTL, already past).
#[test]
fn restore_checks_versions_deadlines_and_format() {
    let redis = RedisServer::start();
    let weft = TestServer::start();
    let mut r = Raw::connect(([127, 0, 0, 1], redis.port).into());
    let mut w = weft.raw();
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
    let payload = |body: &[u8], version: u16| {
        let mut p = body.to_vec();
        p.extend_from_slice(&version.to_le_bytes());
        let c = crc.checksum(&p);
        p.extend_from_slice(&c.to_le_bytes());
        p
    };
    // "hi" as a string object.
    let good = payload(&[0, 2, b'h', b'i'], 10);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("version 12", payload(&[0, 2, b'h', b'i'], 12)),
        ("version 9", payload(&[0, 2, b'h', b'i'], 9)),
        ("empty set", payload(&[2, 0], 10)),
        ("truncated", payload(&[0, 5, b'h'], 10)),
        ("unknown type", payload(&[99, 0], 10)),
        ("stream", payload(&[15, 0], 10)),
        (
            "duplicate set members",
            payload(&[2, 2, 1, b'a', 1, b'a'], 10),
        ),
        ("short", vec![1, 2, 3]),
    ];
    for (what, p) in &cases {
        let want = cmdb(&mut r, &[b"RESTORE", b"k", b"0", p]);
        assert_eq!(cmdb(&mut w, &[b"RESTORE", b"k", b"0", p]), want, "{what}");
    }
    // Deadlines.
    for c in [&mut r, &mut w] {
        assert_eq!(
            cmdb(c, &[b"RESTORE", b"t1", b"5000", &good]),
            V::Simple("OK".into())
        );
        let at = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            + 9_000_000)
            .to_string();
        assert_eq!(
            cmdb(c, &[b"RESTORE", b"t2", at.as_bytes(), &good, b"ABSTTL"]),
            V::Simple("OK".into())
        );
        assert_eq!(c.cmd(&["PEXPIRETIME", "t2"]), V::Int(at.parse().unwrap()));
        assert!(matches!(c.cmd(&["TTL", "t1"]), V::Int(4 | 5)));
        // Already past: OK, and nothing is created (REPLACE deletes the old).
        assert_eq!(
            cmdb(c, &[b"RESTORE", b"t1", b"1", &good, b"ABSTTL", b"REPLACE"]),
            V::Simple("OK".into())
        );
        assert_eq!(c.cmd(&["EXISTS", "t1"]), V::Int(0));
        assert_eq!(
            cmdb(c, &[b"RESTORE", b"t3", b"0", &good, b"IDLETIME", b"100"]),
            V::Simple("OK".into())
        );
        assert_eq!(c.cmd(&["GET", "t3"]), V::bulk("hi"));
        // k (the version 9 payload, which both accept), t2, t3.
        assert_eq!(c.cmd(&["DBSIZE"]), V::Int(3));
    }
    // Weft's DUMP of a short string is byte for byte Redis's.
    for k in ["t3", "t2"] {
        assert_eq!(w.cmd(&["DUMP", k]), r.cmd(&["DUMP", k]), "{k}");
    }
}

/// MIGRATE from Weft to a real Redis (with a password), to a second
/// Weft, and from Redis to Weft: single key and KEYS forms, COPY,
/// REPLACE, AUTH/AUTH2, BUSYKEY from the target, TTLs carried.
#[test]
fn migrate_moves_keys_between_weft_and_redis() {
    let redis = RedisServer::start_with(&["--requirepass", "sesame"]);
    let weft = TestServer::start();
    let weft2 = TestServer::start();
    let mut r = Raw::connect(([127, 0, 0, 1], redis.port).into());
    assert_eq!(r.cmd(&["AUTH", "sesame"]), V::Simple("OK".into()));
    let mut w = weft.raw();
    let mut w2 = weft2.raw();
    fill(&mut w);
    let rport = redis.port.to_string();
    let w2port = weft2.addr.port().to_string();
    let wport = weft.addr.port().to_string();
    let before: Vec<Vec<V>> = FILLED[..19].iter().map(|k| contents(&mut w, k)).collect();

    // Single key, AUTH: moved (gone here).
    assert_eq!(
        w.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &rport,
            "s_text",
            "0",
            "5000",
            "AUTH",
            "sesame"
        ]),
        V::Simple("OK".into())
    );
    assert_eq!(w.cmd(&["EXISTS", "s_text"]), V::Int(0));
    assert_eq!(contents(&mut r, "s_text"), before[0]);
    // Without the password the target refuses, and nothing moves.
    let e = w.cmd(&["MIGRATE", "127.0.0.1", &rport, "s_int8", "0", "5000"]);
    assert!(
        matches!(&e, V::Err(m) if m.starts_with("ERR Target instance replied with error: NOAUTH")),
        "{e:?}"
    );
    assert_eq!(w.cmd(&["EXISTS", "s_int8"]), V::Int(1));
    // KEYS form with COPY and AUTH2: copied (kept here), TTL carried.
    let mut args = vec![
        "MIGRATE",
        "127.0.0.1",
        &rport,
        "",
        "0",
        "5000",
        "COPY",
        "AUTH2",
        "default",
        "sesame",
        "KEYS",
    ];
    args.extend(FILLED[1..19].iter().copied());
    args.push("nosuch");
    assert_eq!(w.cmd(&args), V::Simple("OK".into()));
    for (i, k) in FILLED[1..19].iter().enumerate() {
        assert_eq!(contents(&mut w, k), before[i + 1], "{k} kept");
        assert_eq!(contents(&mut r, k), before[i + 1], "{k} on redis");
    }
    // Again without REPLACE: BUSYKEY from the target, keys kept here.
    let e = w.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &rport,
        "l_big",
        "0",
        "5000",
        "AUTH",
        "sesame",
    ]);
    assert_eq!(
        e,
        V::Err(
            "ERR Target instance replied with error: BUSYKEY Target key name already exists."
                .into()
        )
    );
    assert_eq!(w.cmd(&["EXISTS", "l_big"]), V::Int(1));
    // With REPLACE it moves.
    w.cmd(&["RPUSH", "l_big", "one-more"]);
    let want = contents(&mut w, "l_big");
    assert_eq!(
        w.cmd(&[
            "MIGRATE",
            "127.0.0.1",
            &rport,
            "l_big",
            "0",
            "5000",
            "REPLACE",
            "AUTH",
            "sesame"
        ]),
        V::Simple("OK".into())
    );
    assert_eq!(contents(&mut r, "l_big"), want);
    assert_eq!(w.cmd(&["EXISTS", "l_big"]), V::Int(0));

    // Weft to Weft: every key, KEYS form, moved.
    let mut args = vec!["MIGRATE", "127.0.0.1", &w2port, "", "0", "5000", "KEYS"];
    let rest: Vec<&str> = FILLED[1..19]
        .iter()
        .copied()
        .filter(|k| *k != "l_big")
        .collect();
    args.extend(rest.iter().copied());
    assert_eq!(w.cmd(&args), V::Simple("OK".into()));
    for k in &rest {
        let i = FILLED.iter().position(|x| x == k).unwrap();
        assert_eq!(contents(&mut w2, k), before[i], "{k} on the second weft");
    }
    assert_eq!(w.cmd(&["DBSIZE"]), V::Int(0));
    assert_eq!(
        w.cmd(&["MIGRATE", "127.0.0.1", &w2port, "nosuch", "0", "100"]),
        V::Simple("NOKEY".into())
    );

    // Redis to Weft: Redis's own MIGRATE speaks to Weft's RESTORE.
    let mut args = vec!["MIGRATE", "127.0.0.1", &wport, "", "0", "5000", "KEYS"];
    args.extend(FILLED[..19].iter().copied());
    assert_eq!(r.cmd(&args), V::Simple("OK".into()));
    for (i, k) in FILLED[..19].iter().enumerate() {
        if *k == "l_big" {
            continue;
        }
        assert_eq!(contents(&mut w, k), before[i], "{k} back from redis");
    }
    assert_eq!(r.cmd(&["DBSIZE"]), V::Int(0));
}

/// SCAN takes any cursor as Redis does: an unknown or forgotten one (or
/// `-1`) is not an error, and a scan from it still ends at 0 having
/// returned every key.
#[test]
fn scan_accepts_any_cursor() {
    let weft = TestServer::start();
    let mut w = weft.raw();
    let keys: Vec<String> = (0..50).map(|i| format!("k{i:02}")).collect();
    for k in &keys {
        w.cmd(&["SET", k, "v"]);
    }
    w.cmd(&["HSET", "h", "a", "1", "b", "2"]);
    // Cursors this server never handed out (it numbers its own from 1).
    for start in ["-1", "12345678", "18446744073709551615", "", "+99999999"] {
        let mut cursor = start.to_string();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..100 {
            let V::Array(a) = w.cmd(&["SCAN", &cursor, "COUNT", "7"]) else {
                panic!("SCAN {cursor}");
            };
            let (V::Bulk(c), V::Array(found)) = (&a[0], &a[1]) else {
                panic!("SCAN reply {a:?}");
            };
            for f in found {
                if let V::Bulk(k) = f {
                    seen.insert(String::from_utf8(k.clone()).unwrap());
                }
            }
            cursor = String::from_utf8(c.clone()).unwrap();
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(cursor, "0", "scan from {start:?} ends");
        assert_eq!(seen.len(), 51, "scan from {start:?} returns every key");
        let V::Array(a) = w.cmd(&["HSCAN", "h", start]) else {
            panic!("HSCAN {start}");
        };
        assert_eq!(
            a[1],
            V::Array(vec![V::bulk("a"), V::bulk("1"), V::bulk("b"), V::bulk("2")])
        );
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
        run_lines_on(TX_SCRIPT, &mut w, &mut r, Some((&mut w2, &mut r2)), proto);
    }
}

/// What the scripts above leave out of keyspace events: orders between
/// keys (`MSET` with a repeated key, `SMOVE`/`LMOVE` to new keys,
/// `RENAME`/`COPY` over existing keys), overwrites that are not new keys
/// (`SET` over a hash, `*STORE` over another type), emptied collections,
/// blocking pops served at once, and the databases in channel names.
const NOTIFY_SCRIPT: &str = r#"
MSET a 1 b 2 a 3
MSETNX c 1 d 2
MSETNX c 1 e 2
SET a x EX 100
SET a y KEEPTTL
SET a z NX
SET a z XX GET
SETNX a q
SETNX newk q
GETSET newk2 v
INCRBY a 1
INCRBY cnt 5
DECR cnt
APPEND a tail
SETRANGE a 0 ""
SETRANGE nos 0 ""
SETRANGE nos 2 xy
SETBIT bits 3 1
SETBIT bits 3 1
INCRBYFLOAT fl 1.5
HSET h f v
SET h str
HSET h2 f v g w
HSETNX h2 f x
HSETNX h2 z x
HDEL h2 f g z
HINCRBY h3 f 2
HINCRBYFLOAT h3 g 2.5
HDEL h3 f g
SADD s1 a b c
SADD s1 a
SMOVE s1 s2 a
SMOVE s1 s2 a
SMOVE s1 s1 b
SADD s2 b
SMOVE s1 s2 b
SMOVE s1 s3 c
SADD s4 x y z
SPOP s4 0
SPOP s4 1
SPOP s4 5
SADD s5 1 2
SADD s6 2 3
SINTERSTORE d5 s5 s6
SUNIONSTORE d5 s5 s6
SDIFFSTORE d5 s5 s6 s5
SET strdst v
SUNIONSTORE strdst s5
SINTERSTORE nodst s5 nosuch
RPUSH l1 a b
LMOVE l1 l2 LEFT RIGHT
LMOVE l1 l2 LEFT LEFT
LMOVE l2 l2 RIGHT LEFT
RPOPLPUSH l2 l3
RPUSH bl a
BLPOP bl 0
RPUSH bl a b
BRPOP bl 0
BLMPOP 0 1 bl RIGHT COUNT 5
RPUSH bm a
BLMOVE bm bm2 LEFT RIGHT 0
BRPOPLPUSH bm2 bm3 0
LPUSHX nolist a
RPUSH lt a b c
LTRIM lt 0 -1
LTRIM lt 1 0
RPUSH lr a b a
LREM lr 0 zz
LREM lr 0 a
LREM lr 0 b
RPUSH ls a
LSET ls 0 b
LINSERT ls BEFORE b a
LINSERT ls BEFORE nope a
LPOP ls 0
LPOP ls 5
ZADD z 1 a 2 b
ZADD z 1 a
ZADD z 3 a
ZADD z INCR 0 a
ZADD z INCR 1 a
ZADD z XX 1 newm
ZADD zz XX 1 a
ZINCRBY z 1 b
ZREM z nope
ZADD zb 1 a 2 b 3 c 4 d
ZPOPMIN zb
ZPOPMAX zb 0
ZPOPMAX zb 1
BZPOPMIN zb 0
BZMPOP 0 1 zb MAX COUNT 3
ZADD zr 1 a 2 b 3 c
ZREMRANGEBYSCORE zr 5 6
ZREMRANGEBYSCORE zr 1 1
ZREMRANGEBYRANK zr 0 0
ZREMRANGEBYLEX zr - +
ZADD zs1 1 a 2 b
ZADD zs2 2 b 3 c
ZUNIONSTORE zd 2 zs1 zs2
ZINTERSTORE zd 2 zs1 zs2
ZDIFFSTORE zd 2 zs1 zs1
ZRANGESTORE zd2 zs1 0 -1
ZRANGESTORE zd2 zs1 5 6
SET zstr v
ZUNIONSTORE zstr 1 zs1
ZMPOP 1 zs1 MIN COUNT 9
SET r1 v
SET r2 w
RENAME r1 r2
RENAMENX r2 r3
RENAME r3 r3
COPY r3 r4
COPY r3 r4 REPLACE
COPY r3 r4 DB 2
SELECT 2
SET d2 v
EXPIRE d2 100
PERSIST d2
PERSIST d2
DEL d2 d2 nosuch
SELECT 0
MOVE r4 3
EXPIRE r3 100 NX
EXPIRE r3 100 NX
PEXPIRE r3 -1
GETEX r4 EX 100
GETEX r4 PERSIST
GETEX r4 PERSIST
GETEX r4 PXAT 1
GETDEL a
GETDEL nosuch
DEL c d e nosuch c
UNLINK newk
MULTI
SET tx 1
LPUSH txl a
RENAME tx tx2
DEL tx2
EXEC
"#;

/// Every keyspace event one server publishes, as a subscriber sees them:
/// `channel payload` lines, the script line that raised them found by a
/// marker published after each line from a third connection (messages
/// ordered by a reply keep their order).
struct Events {
    sub: Raw,
    marker: Raw,
}

impl Events {
    fn new(addr: std::net::SocketAddr) -> Events {
        let mut sub = Raw::connect(addr);
        assert!(matches!(
            sub.cmd(&["PSUBSCRIBE", "__key*__:*"]),
            V::Array(_)
        ));
        assert!(matches!(
            sub.cmd(&["SUBSCRIBE", "events-marker"]),
            V::Array(_)
        ));
        Events {
            sub,
            marker: Raw::connect(addr),
        }
    }

    /// The events published since the last call.
    fn since_last(&mut self) -> Vec<String> {
        assert_eq!(
            self.marker.cmd(&["PUBLISH", "events-marker", "m"]),
            V::Int(1)
        );
        let mut out = Vec::new();
        loop {
            let V::Array(m) = self.sub.read() else {
                panic!("a subscriber got a non-message")
            };
            let text = |v: &V| match v {
                V::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            };
            match m.len() {
                3 => return out, // the marker
                4 => out.push(format!("{} {}", text(&m[2]), text(&m[3]))),
                _ => panic!("odd message {m:?}"),
            }
        }
    }
}

/// Runs `script` on both servers (lines starting `2 ` on the second
/// connections; replies are compared by the tests above) and compares
/// the keyspace events each line raised; returns the differences.
fn events_per_line(
    script: &str,
    conns: [&mut Raw; 4],
    events: [&mut Events; 2],
    bad: &mut Vec<String>,
) {
    let [w, r, w2, r2] = conns;
    let [ew, er] = events;
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let line = line.trim_start_matches(['^', '~']);
        let (line, second) = match line.strip_prefix("2 ") {
            Some(rest) => (rest, true),
            None => (line, false),
        };
        let args = split_line(line);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if second {
            w2.cmd(&args);
            r2.cmd(&args);
        } else {
            w.cmd(&args);
            r.cmd(&args);
        }
        let (got, want) = (ew.since_last(), er.since_last());
        if got != want {
            bad.push(format!("{line}\n weft:  {got:?}\n redis: {want:?}"));
        }
    }
}

/// Keyspace notifications side by side with Redis 7: `CONFIG SET/GET
/// notify-keyspace-events` with Redis's letters and errors, then every
/// line of the scripts above (strings, keys, hashes, lists, sets, sorted
/// sets, transactions, databases) run on both with `AKEn`, each line's
/// events equal in order; then a client woken from `BLPOP` by another's
/// push, and expiry by a write that finds the key expired and by the
/// background expirer.
#[test]
fn keyspace_notifications_match_redis_7() {
    let redis = RedisServer::start();
    // Several loops: the pusher, the blocked client and the subscriber
    // below live on different ones.
    let weft = TestServer::with(|c| c.threads = 4);
    let raddr: std::net::SocketAddr = ([127, 0, 0, 1], redis.port).into();
    let mut w = weft.raw();
    let mut r = Raw::connect(raddr);
    let mut w2 = weft.raw();
    let mut r2 = Raw::connect(raddr);
    let mut bad = Vec::new();
    for flags in [
        "KEA",
        "AKEn",
        "g$lshzxetdnmKE",
        "KEg$",
        "AAKKgg",
        "Ex",
        "nlK",
        "",
        "KEQ",
        "k",
        "A E",
        "KEm",
    ] {
        let set = |c: &mut Raw| c.cmd(&["CONFIG", "SET", "notify-keyspace-events", flags]);
        let get = |c: &mut Raw| c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]);
        let (sw, sr) = (set(&mut w), set(&mut r));
        let (gw, gr) = (get(&mut w), get(&mut r));
        if (&sw, &gw) != (&sr, &gr) {
            bad.push(format!(
                "CONFIG SET {flags:?}\n weft:  {sw:?} {gw:?}\n redis: {sr:?} {gr:?}"
            ));
        }
    }
    // Nothing is published while neither K nor E is set.
    let mut ew = Events::new(weft.addr);
    let mut er = Events::new(raddr);
    for c in [&mut w, &mut r] {
        c.cmd(&["FLUSHALL"]);
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "A"]);
        c.cmd(&["SET", "quiet", "1"]);
    }
    assert_eq!(ew.since_last(), Vec::<String>::new());
    assert_eq!(er.since_last(), Vec::<String>::new());
    for c in [&mut w, &mut r] {
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "AKEn"]);
        c.cmd(&["FLUSHALL"]);
    }
    for script in [SCRIPT, SCRIPT_KEYS, TX_SCRIPT, NOTIFY_SCRIPT] {
        for c in [&mut w, &mut r] {
            c.cmd(&["FLUSHALL"]);
        }
        events_per_line(
            script,
            [&mut w, &mut r, &mut w2, &mut r2],
            [&mut ew, &mut er],
            &mut bad,
        );
    }
    assert!(
        bad.is_empty(),
        "{} lines raise other events:\n{}",
        bad.len(),
        bad.join("\n")
    );

    // A client blocked in BLPOP, woken by another's push: the pusher's
    // events come first, even though the pusher goes on with slow
    // commands (KEYS over 20000 keys of database 9) before its connection
    // sends anything.
    let mut mset: Vec<String> = vec!["MSET".into()];
    for i in 0..20_000 {
        mset.push(format!("k{i}"));
        mset.push("v".into());
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    for (c, blocked) in [(&mut w, &mut w2), (&mut r, &mut r2)] {
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", ""]);
        c.cmd(&["SELECT", "9"]);
        c.cmd(&mset);
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "AKEn"]);
        blocked.cmd(&["SELECT", "9"]);
        blocked.send(&["BLPOP", "bq", "0"]);
        // Parked before the push, or served at once: the same events.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut pipeline = Raw::encode(&[b"RPUSH", b"bq", b"x"]);
        for _ in 0..5 {
            pipeline.extend_from_slice(&Raw::encode(&[b"KEYS", b"*nomatch"]));
        }
        c.send_bytes(&pipeline);
        assert_eq!(c.read(), V::Int(1));
        for _ in 0..5 {
            assert_eq!(c.read(), V::Array(vec![]));
        }
        assert_eq!(blocked.read(), V::Array(vec![V::bulk("bq"), V::bulk("x")]));
        for c in [c, blocked] {
            c.cmd(&["SELECT", "0"]);
        }
    }
    let want: Vec<String> = [
        "__keyspace@9__:bq new",
        "__keyevent@9__:new bq",
        "__keyspace@9__:bq rpush",
        "__keyevent@9__:rpush bq",
        "__keyspace@9__:bq lpop",
        "__keyevent@9__:lpop bq",
        "__keyspace@9__:bq del",
        "__keyevent@9__:del bq",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(er.since_last(), want, "redis");
    assert_eq!(ew.since_last(), want, "weft");

    // A write that finds its key expired: `expired` before its own
    // events (whether the lookup or an expiry cycle deleted it).
    for c in [&mut w, &mut r] {
        c.cmd(&["SET", "e", "v", "PX", "1"]);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    for c in [&mut w, &mut r] {
        c.cmd(&["INCR", "e"]);
    }
    let (got, want) = (ew.since_last(), er.since_last());
    assert_eq!(got, want);
    assert_eq!(
        want[6..],
        [
            "__keyspace@0__:e expired",
            "__keyevent@0__:expired e",
            "__keyspace@0__:e new",
            "__keyevent@0__:new e",
            "__keyspace@0__:e incrby",
            "__keyevent@0__:incrby e"
        ]
    );
    // The background expirer's `expired`, unprompted.
    for (c, ev) in [(&mut w, &mut ew), (&mut r, &mut er)] {
        c.cmd(&["SELECT", "5"]);
        c.cmd(&["SET", "gone", "v", "PX", "30"]);
        let mut seen = ev.since_last();
        // Bounded: the subscriber's reads time out (common::TIMEOUT).
        while seen.len() < 8 {
            let V::Array(m) = ev.sub.read() else {
                panic!("a subscriber got a non-message")
            };
            let V::Bulk(ch) = &m[2] else { panic!("{m:?}") };
            seen.push(String::from_utf8_lossy(ch).into_owned());
        }
        assert_eq!(
            seen[6..],
            ["__keyspace@5__:gone", "__keyevent@5__:expired"],
            "{seen:?}"
        );
        c.cmd(&["SELECT", "0"]);
    }
}

/// `blocked_clients` of `INFO clients`.
fn blocked_clients(c: &mut Raw) -> i64 {
    let V::Bulk(text) = c.cmd(&["INFO", "clients"]) else {
        panic!("INFO clients")
    };
    let text = String::from_utf8(text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits (bounded) until `n` clients are blocked.
fn wait_blocked(c: &mut Raw, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked_clients(c) != n {
        assert!(Instant::now() < deadline, "never {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What one server answers through a `CLIENT UNBLOCK` session: the
/// blocked client's replies and the unblocker's, in order.
fn unblock_session(addr: std::net::SocketAddr, resp3: bool) -> Vec<V> {
    let mut ctl = Raw::connect(addr);
    ctl.cmd(&["FLUSHALL"]);
    let mut seen = Vec::new();
    let blocking: [&[&str]; 7] = [
        &["BLPOP", "k", "0"],
        &["BRPOP", "k", "k2", "100"],
        &["BLMOVE", "k", "d", "LEFT", "RIGHT", "0"],
        &["BRPOPLPUSH", "k", "d", "0"],
        &["BLMPOP", "0", "1", "k", "LEFT"],
        &["BZPOPMIN", "z", "0"],
        &["BZMPOP", "0", "1", "z", "MAX"],
    ];
    for how in ["TIMEOUT", "ERROR", ""] {
        for cmd in blocking {
            let mut b = Raw::connect(addr);
            if resp3 {
                b.cmd(&["HELLO", "3"]);
            }
            let V::Int(id) = b.cmd(&["CLIENT", "ID"]) else {
                panic!("CLIENT ID")
            };
            let id = id.to_string();
            // The blocking command and a PING behind it in one write.
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            let mut bytes = Raw::encode(&args);
            bytes.extend(Raw::encode(&[b"PING"]));
            b.send_bytes(&bytes);
            wait_blocked(&mut ctl, 1);
            let mut unblock = vec!["CLIENT", "UNBLOCK", id.as_str()];
            if !how.is_empty() {
                unblock.push(how);
            }
            seen.push(ctl.cmd(&unblock));
            seen.push(b.read());
            seen.push(b.read());
            // Unparked for good: a push finds nobody waiting, and the
            // client runs what it sends.
            wait_blocked(&mut ctl, 0);
            seen.push(ctl.cmd(&unblock));
            seen.push(b.cmd(&["ECHO", "after"]));
        }
    }
    seen.push(ctl.cmd(&["RPUSH", "k", "x"]));
    seen.push(ctl.cmd(&["LLEN", "k"]));
    // Errors, and clients that are not blocked.
    let V::Int(me) = ctl.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID")
    };
    let me = me.to_string();
    for args in [
        vec!["CLIENT", "UNBLOCK", &me],
        vec!["CLIENT", "UNBLOCK", "999999"],
        vec!["CLIENT", "UNBLOCK", "-1"],
        vec!["CLIENT", "UNBLOCK", "x"],
        vec!["CLIENT", "UNBLOCK", "x", "BOGUS"],
        vec!["CLIENT", "UNBLOCK", &me, "error"],
        vec!["CLIENT", "UNBLOCK", &me, "timeout"],
        vec!["CLIENT", "UNBLOCK"],
        vec!["CLIENT", "UNBLOCK", &me, "ERROR", "x"],
    ] {
        seen.push(ctl.cmd(&args));
    }
    seen
}

/// `CLIENT UNBLOCK id [TIMEOUT|ERROR]` side by side with Redis 7: every
/// blocking pop unparked with its timeout reply or `-UNBLOCKED`, the
/// requests behind it then run, nothing left waiting; 0 for clients not
/// blocked; Redis's errors. Weft runs several loops, so the unblocker and
/// the blocked client mostly live on different ones.
#[test]
fn client_unblock_answers_as_redis_7_does() {
    let redis = RedisServer::start();
    let weft = TestServer::with(|c| c.threads = 3);
    for resp3 in [false, true] {
        let want = unblock_session(([127, 0, 0, 1], redis.port).into(), resp3);
        let got = unblock_session(weft.addr, resp3);
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "reply {i} (resp3 {resp3})");
        }
    }
}
