//! `server_commands`: the server's command handlers, driven over loopback.
//!
//! The other targets hold one decoder to its contract; this one holds the
//! whole request path — lookup, arity, every handler's argument parsing,
//! the handlers themselves over values of every type, and the reply
//! encoder — to the server's: whatever a client sends, it gets exactly one
//! well-formed RESP reply per request, the server stays up, and the store
//! stays consistent.
//!
//! One in-process server (`weft_server::Server` on 127.0.0.1:0, one event
//! loop) serves every input; each input is a short program of commands,
//! run on a fresh connection after `FLUSHALL` and a fixed setup that
//! leaves a value of every type under a small set of keys (and, when the
//! input asks, collections big enough to be dropped by range deletes).
//! A command is drawn from the bytes as
//!
//! - a name from the server's own table (`cmd::COMMANDS`, so a command
//!   added later is fuzzed without a change here), with arguments that
//!   follow its Redis 7 grammar (`COMMAND DOCS`, `cmd::meta`: tokens,
//!   optional and repeated arguments, one-of choices, subcommands), each
//!   leaf drawn from the values its type takes or, one time in eight,
//!   from any class, and now and then an argument dropped, repeated or
//!   inserted; or
//! - the same name with arguments drawn freely, about as many as its
//!   arity asks; or a misspelt name; or a literal name and arguments (how
//!   the seed corpus spells whole commands, independent of the table).
//!
//! Argument values: the keys of the setup; member and field names the
//! setup used; integers small, large, at and past the `i64` bounds and
//! malformed; floats including `inf`, `nan`, `-0`, subnormals, overflow
//! and malformed text; score and lex range bounds; glob patterns (some
//! that backtrack); `DUMP` payloads of every type, damaged and resealed
//! with a valid checksum so `RESTORE`'s decoder is reached; raw bytes and
//! keys at and past the key-size limit.
//!
//! What stops the loop or the process is handled deliberately: `SHUTDOWN`,
//! `MONITOR`, the `SUBSCRIBE` family (one reply per channel by design)
//! and replication commands become `PING`, and so does `MULTI` (what it
//! queues answers `+QUEUED`, which the reply checks do not model);
//! `WAIT` waits 20 ms at most; `MIGRATE` targets a closed
//! loopback port; `CONFIG SET` of `requirepass`, `maxclients` or
//! `timeout` sets `slowlog-max-len` instead (and the settings a program
//! may change are reset after it); blocking pops get a short or invalid
//! timeout, never one that blocks for good; `SRANDMEMBER`-style negative
//! counts past 10,000 (replies of that many elements, not a bug) become
//! -1,000. `QUIT`, and `CLIENT KILL` of the connection itself, close the
//! connection after their reply: the program goes on on a new one.
//!
//! Checked after every request: one reply, well formed (types the
//! connection's protocol allows, lengths and terminators exact, error
//! replies led by an upper-case code), within 5 s. After every program:
//! `PING` answers `PONG`; on a fresh connection `DBSIZE` equals the number
//! of `KEYS *` (once the expirer has caught up), every key is of a known
//! type, a collection is not empty and lists as many elements as its
//! length command counts, a sorted set's members come in score order with
//! `ZSCORE` agreeing. One program in sixteen then stops the server
//! cleanly, checks the engine's records (`check_records`, shared with the
//! model tests: no orphan element, counts equal to the metadata's) and
//! restarts it on the same directory: every key is back with the same
//! `DUMP`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use weft_server::cmd::meta::{self, D};
use weft_server::cmd::COMMANDS;
use weft_server::{Config, Server, ShutdownHandle, SyncMode};

#[path = "../../../weft-server/tests/common/records.rs"]
mod records;

/// How long one reply may take (a blocking pop here waits 0.02 s at most).
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Commands in one program, at most.
const MAX_COMMANDS: usize = 32;
/// Arguments of one command, at most.
const MAX_ARGS: usize = 48;
/// The longest string the fuzzed server accepts (`proto-max-bulk-len`):
/// `SETRANGE`/`SETBIT`/`APPEND` may grow a string this far, so it bounds
/// the work one command may legitimately ask for.
const MAX_BULK: usize = 1 << 20;

// ---------------------------------------------------------------------------
// The value classes.

/// Keys the setup fills (see [`setup`]) and a few it leaves empty.
const KEYS: &[&[u8]] = &[
    b"s", b"t", b"l", b"S", b"I", b"z", b"h", b"L", b"B", b"Z", b"H", b"n", b"a", b"",
];

/// Member and field names the setup used, and a few more.
const MEMBERS: &[&[u8]] = &[
    b"a",
    b"b",
    b"c",
    b"1",
    b"2",
    b"-1",
    b"f",
    b"g",
    b"lo",
    b"hi",
    b"m7",
    b"x",
    b"",
    b"\0",
    b"\xc3\xa9",
    b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
];

/// Keywords any command may meet (those of its own grammar come from
/// `COMMAND DOCS`).
const KEYWORDS: &[&str] = &[
    "WITHSCORES",
    "LIMIT",
    "BYSCORE",
    "BYLEX",
    "REV",
    "COUNT",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "KEEPTTL",
    "PERSIST",
    "GET",
    "MATCH",
    "TYPE",
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "RANK",
    "MAXLEN",
    "WITHVALUES",
    "NOVALUES",
    "REPLACE",
    "ABSTTL",
    "IDLETIME",
    "FREQ",
    "DB",
    "COPY",
    "KEYS",
    "AUTH",
    "AUTH2",
    "BYTE",
    "BIT",
    "LEN",
    "IDX",
    "MINMATCHLEN",
    "WITHMATCHLEN",
    "SYNC",
    "ASYNC",
    "SCHEDULE",
    "ENCODING",
    "REFCOUNT",
    "HELP",
    "ID",
    "SETNAME",
    "GETNAME",
    "LIST",
    "KILL",
    "SKIPME",
    "ADDR",
    "LADDR",
    "USER",
    "SETINFO",
    "NO-EVICT",
    "RESETSTAT",
    "SET",
    "DOCS",
    "INFO",
    "GETKEYS",
    "RESET",
    "LATEST",
    "HISTORY",
    "DOCTOR",
    "CHANNELS",
    "NUMSUB",
    "NUMPAT",
    "all",
    "everything",
    "default",
    "keyspace",
    "slowlog-max-len",
    "slowlog-log-slower-than",
    "latency-monitor-threshold",
    "client-output-buffer-limit",
    "maxmemory",
    "notify-keyspace-events",
    "KEA",
    "AKEn",
    "Ex",
];

/// Integers at the edges and a few that are not integers.
const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "-2",
    "10",
    "100",
    "-100",
    "255",
    "256",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "4294967296",
    "536870911",
    "536870912",
    "1048576",
    "9007199254740993",
    "4611686018427387903",
    "-4611686018427387904",
    "9223372036854775807",
    "-9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "99999999999999999999999",
    "-0",
    "+1",
    "01",
    "00",
    " 1",
    "1 ",
    "1.0",
    "1e3",
    "0x10",
    "",
    "-",
    "--1",
    "1\0",
];

/// Floats at the edges and text that is almost a float.
const FLOATS: &[&str] = &[
    "0",
    "-0",
    "0.0",
    "-0.0",
    "1.5",
    "-2.5",
    ".5",
    "5.",
    "1e10",
    "1e308",
    "1.7976931348623157e308",
    "1e309",
    "-1e309",
    "4.9e-324",
    "2.2250738585072014e-308",
    "1e-400",
    "inf",
    "-inf",
    "+inf",
    "Inf",
    "INF",
    "infinity",
    "-infinity",
    "nan",
    "-nan",
    "NaN",
    "1e",
    "e1",
    "0x1p3",
    "1_0",
    "3.14abc",
    " 1.5",
    "1.5 ",
    "+",
    "9007199254740993",
    "0.1",
    "1e-2",
    "123456789012345678901234567890",
    // C's strtod/strtold forms (cmd/strtod.rs, cmd/long_double.rs).
    "0x10",
    "-0X1.8p1",
    "0x.8",
    "0x1p-1074",
    "0x1p-1076",
    "0x1p99999",
    "0x1.fffffffffffff8p1023",
    "0x",
    "0x1p",
    "nan(1)",
    "1e4932",
    "1.2e4932",
    "1e-4950",
    "1e-99999999999",
    "1e99999999999",
];

/// Range bounds of `ZRANGEBYSCORE` and `ZRANGEBYLEX` and their kin.
const BOUNDS: &[&str] = &[
    "-inf", "+inf", "inf", "(1", "(-inf", "(+inf", "(nan", "((1", "(", "[", "[a", "(a", "[b", "(c",
    "-", "+", "a", "[\u{e9}", "(0", "1", "(2.5", "2.5", "-1", "", " 1", "( 1", "(0x10", "0x1p3",
    "1e400", "(1e-400", "\t2",
];

/// Glob patterns, some of them costly for a backtracking matcher.
const PATTERNS: &[&str] = &[
    "*",
    "?",
    "[a-z]",
    "[^a]*",
    "[!a]",
    "\\",
    "[",
    "[]",
    "a[",
    "[a-",
    "[z-a]",
    "\\*",
    "h*",
    "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
    "**********************************************************x",
    "?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*?*!",
    "[[[[[[[[[[[[[[[[[",
];

/// Blocking pops' timeouts: short, or refused (never 0 or long: they
/// would block for good).
const TIMEOUTS: &[&str] = &[
    "0.01", "0.02", ".01", "1e-2", "0.001", "-1", "-0.01", "x", "", "inf", "+inf", "-inf", "nan",
    "1e20", "0.01x", "0x1p-7", "1e-5000", "0x",
];

/// Commands that would end the loop, the process, or the one-reply rule.
const EXCLUDED: &[&str] = &[
    // Queues what follows, which the reply checks here do not model (its
    // own tests: weft-server's tests/transactions.rs).
    "multi",
    "shutdown",
    "monitor",
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "debug",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "failover",
];

/// `(command, position of its timeout)`; `None`: the last argument.
const BLOCKING: &[(&str, Option<usize>)] = &[
    ("blpop", None),
    ("brpop", None),
    ("blmove", None),
    ("brpoplpush", None),
    ("bzpopmin", None),
    ("bzpopmax", None),
    ("blmpop", Some(1)),
    ("bzmpop", Some(1)),
];

/// Names close to real ones.
const BOGUS: &[&[u8]] = &[
    b"",
    b"gett",
    b"get\0",
    b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "\u{ff27}\u{ff25}\u{ff34}".as_bytes(),
    b"weft.",
    b"zadd ",
    b"\r\n",
];

// ---------------------------------------------------------------------------
// From bytes to a program.

/// The fuzz input, read a byte at a time, then a tail of [`TAIL`]
/// pseudo-random bytes seeded by a hash of the input, then zeros.
///
/// The tail is there because `cargo test`'s random inputs are short (a
/// few dozen bytes: two or three commands); with it every input runs a
/// program of useful length, still a function of the input alone (a
/// failure replays from its input or its `BOLERO_RANDOM_SEED`).
/// libFuzzer grows the inputs it finds interesting past it anyway.
struct Bytes<'a> {
    input: &'a [u8],
    tail_left: usize,
    state: u64,
}

/// Bytes of the pseudo-random tail.
const TAIL: usize = 384;

impl<'a> Bytes<'a> {
    fn new(input: &'a [u8]) -> Bytes<'a> {
        // FNV-1a: any change to the input changes the tail.
        let state = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
            (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
        });
        Bytes {
            input,
            tail_left: TAIL,
            state,
        }
    }

    fn u8(&mut self) -> u8 {
        if let Some((&b, rest)) = self.input.split_first() {
            self.input = rest;
            return b;
        }
        if self.tail_left == 0 {
            return 0;
        }
        self.tail_left -= 1;
        // SplitMix64.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u8
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map_while(|_| (!self.is_empty()).then(|| self.u8()))
            .collect()
    }

    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }

    fn pick<'t, T>(&mut self, from: &'t [T]) -> &'t T {
        &from[usize::from(self.u8()) % from.len()]
    }

    fn is_empty(&self) -> bool {
        self.input.is_empty() && self.tail_left == 0
    }
}

/// A program: how the connection starts and the commands it sends.
#[derive(Debug, Clone, Default)]
struct Program {
    /// Switch to RESP3 (`HELLO 3`) after the setup.
    resp3: bool,
    /// The setup adds collections big enough for range deletes.
    big: bool,
    /// Stop, check the records, restart and compare after the checks.
    restart: bool,
    commands: Vec<Vec<Vec<u8>>>,
}

/// What the generator draws from beside the bytes: the `DUMP` payloads
/// of the setup's values, taken once from the server.
struct Gen<'a> {
    payloads: &'a [Vec<u8>],
    now_s: u64,
    /// The keys of the type the command at hand works on (from its ACL
    /// categories), which its key arguments favour.
    family: &'static [&'static [u8]],
}

impl Gen<'_> {
    fn program(&mut self, input: &[u8]) -> Program {
        let mut b = Bytes::new(input);
        let h = b.u8();
        let mut p = Program {
            resp3: h & 1 != 0,
            big: h & 2 != 0,
            restart: (h >> 2) & 15 == 0,
            commands: Vec::new(),
        };
        while !b.is_empty() && p.commands.len() < MAX_COMMANDS {
            let mut args = self.command(&mut b);
            args.truncate(MAX_ARGS);
            tame(&mut args);
            p.commands.push(args);
        }
        p
    }

    fn command(&mut self, b: &mut Bytes<'_>) -> Vec<Vec<u8>> {
        self.family = &[];
        let c = b.u8();
        if c == 255 {
            // Literal: a name and arguments, each a length byte and bytes.
            let n = usize::from(b.u8() % 16) + 1;
            return (0..n)
                .map(|_| {
                    let len = usize::from(b.u8());
                    b.take(len)
                })
                .collect();
        }
        if c >= 248 {
            let mut args = vec![b.pick(BOGUS).to_vec()];
            let n = usize::from(b.u8() % 4);
            for _ in 0..n {
                args.push(self.any(b));
            }
            return args;
        }
        let cmd = &COMMANDS[usize::from(c) % COMMANDS.len()];
        self.family = family(cmd.name);
        let mode = b.u8();
        let mut name = cmd.name.as_bytes().to_vec();
        match mode >> 6 {
            0 => name.make_ascii_uppercase(),
            1 => {
                for (i, x) in name.iter_mut().enumerate() {
                    if i % 2 == 0 {
                        x.make_ascii_uppercase();
                    }
                }
            }
            _ => {}
        }
        let mut args = vec![name];
        if mode & 3 != 0 {
            self.grammar(b, cmd.name, &mut args);
            if mode & 0x3c == 0 {
                self.damage(b, &mut args);
            }
        } else {
            // Free arguments, about as many as the arity asks.
            let want = cmd.arity.unsigned_abs().saturating_sub(1) as usize;
            let n = match (mode >> 2) & 3 {
                0 => usize::from(b.u8() % 8),
                _ => want + usize::from(b.u8() % 3),
            };
            for _ in 0..n {
                args.push(self.any(b));
            }
        }
        args
    }

    /// Arguments following `name`'s grammar in `COMMAND DOCS`.
    fn grammar(&self, b: &mut Bytes<'_>, name: &str, out: &mut Vec<Vec<u8>>) {
        let Some(m) = meta::find(name) else {
            // No grammar (a Weft command): keys and any values.
            let n = usize::from(b.u8() % 5);
            out.push(self.key(b));
            for _ in 0..n {
                out.push(self.any(b));
            }
            return;
        };
        if !m.subcommands.is_empty() {
            let sub = *b.pick(m.subcommands);
            let word = sub.split('|').nth(1).unwrap_or(sub);
            out.push(word.as_bytes().to_vec());
            if let Some(sm) = meta::find(sub) {
                if let Some(args) = doc_args(sm.docs) {
                    self.args(b, args, out, 0);
                }
            }
            return;
        }
        if let Some(args) = doc_args(m.docs) {
            self.args(b, args, out, 0);
        }
    }

    fn args(&self, b: &mut Bytes<'_>, args: &[D], out: &mut Vec<Vec<u8>>, depth: usize) {
        // Where a `numkeys` went: set to the number of keys that follow
        // it, seven times in eight.
        let mut numkeys = None;
        for a in args {
            if out.len() >= MAX_ARGS || depth > 6 {
                return;
            }
            let flags = field(a, "flags").map(strs).unwrap_or_default();
            if flags.contains(&"optional") && b.u8() & 1 == 0 {
                continue;
            }
            let times = if flags.contains(&"multiple") {
                1 + usize::from(b.u8() % 4)
            } else {
                1
            };
            let token = field(a, "token").and_then(text);
            let name = field(a, "name").and_then(text).unwrap_or("");
            let at = out.len();
            for i in 0..times {
                if let Some(t) = token {
                    if i == 0 || flags.contains(&"multiple_token") {
                        out.push(t.as_bytes().to_vec());
                    }
                }
                self.arg(b, a, out, depth);
            }
            if name == "numkeys" && token.is_none() {
                numkeys = Some(at);
            } else if let Some(n) = numkeys.take() {
                if b.u8() & 7 != 0 && n < out.len() {
                    out[n] = times.to_string().into_bytes();
                }
            }
        }
    }

    fn arg(&self, b: &mut Bytes<'_>, a: &D, out: &mut Vec<Vec<u8>>, depth: usize) {
        let kind = field(a, "type").and_then(text).unwrap_or("string");
        let children = match field(a, "arguments") {
            Some(D::A(c)) => *c,
            _ => &[],
        };
        match kind {
            "pure-token" => {}
            "oneof" if !children.is_empty() => {
                let c = b.pick(children);
                self.args_one(b, c, out, depth + 1);
            }
            "block" => self.args(b, children, out, depth + 1),
            _ => {
                let name = field(a, "name").and_then(text).unwrap_or("");
                out.push(self.leaf(b, kind, name));
            }
        }
    }

    /// One argument of a one-of: its token, then its value.
    fn args_one(&self, b: &mut Bytes<'_>, a: &D, out: &mut Vec<Vec<u8>>, depth: usize) {
        if let Some(t) = field(a, "token").and_then(text) {
            out.push(t.as_bytes().to_vec());
        }
        self.arg(b, a, out, depth);
    }

    /// A value of grammar type `kind` (argument `name`), or one time in
    /// eight a value of any class.
    fn leaf(&self, b: &mut Bytes<'_>, kind: &str, name: &str) -> Vec<u8> {
        let x = b.u8();
        if x & 7 == 0 {
            return self.any(b);
        }
        match kind {
            "key" => self.key(b),
            // Bits, counts, indexes and times: mostly small, where the
            // handlers' work is (a random i64 is mostly out of range).
            "integer" if matches!(name, "bit" | "value") && x & 0x30 != 0 => {
                vec![b'0' + (x >> 7)]
            }
            "integer" if x & 0x30 != 0 => {
                let n = i64::from(b.u8() % 24) - 8;
                n.to_string().into_bytes()
            }
            "integer" => self.int(b),
            "pattern" => b.pick(PATTERNS).as_bytes().to_vec(),
            "unix-time" => self.time(b),
            // Range bounds: scores (`double`), lex or any (`string`).
            "double" if matches!(name, "min" | "max") => match x >> 6 {
                0 | 1 => b.pick(BOUNDS).as_bytes().to_vec(),
                _ => self.float(b),
            },
            _ if matches!(name, "min" | "max") => b.pick(BOUNDS).as_bytes().to_vec(),
            _ if matches!(name, "start" | "stop") => match x >> 5 {
                0 => b.pick(BOUNDS).as_bytes().to_vec(),
                1 => self.float(b),
                2 => self.int(b),
                _ => (i64::from(b.u8() % 24) - 8).to_string().into_bytes(),
            },
            "double" => self.float(b),
            _ if name.contains("payload") || name == "serialized-value" => self.payload(b),
            _ => self.member(b),
        }
    }

    /// A value of any class.
    fn any(&self, b: &mut Bytes<'_>) -> Vec<u8> {
        match b.u8() % 12 {
            0 | 1 => self.key(b),
            2 | 3 => self.member(b),
            4 => b.pick(KEYWORDS).as_bytes().to_vec(),
            5 => self.int(b),
            6 => self.float(b),
            7 => b.pick(BOUNDS).as_bytes().to_vec(),
            8 => b.pick(PATTERNS).as_bytes().to_vec(),
            9 => self.payload(b),
            10 => self.time(b),
            _ => {
                let n = usize::from(b.u8());
                b.take(n)
            }
        }
    }

    fn key(&self, b: &mut Bytes<'_>) -> Vec<u8> {
        let x = b.u8();
        if x < 160 && !self.family.is_empty() {
            return b.pick(self.family).to_vec();
        }
        if x < 250 {
            return KEYS[usize::from(x) % KEYS.len()].to_vec();
        }
        // At and past the limits on keys (64 KiB - 9) and on a
        // collection's key + member (64 KiB - 13, 64 KiB - 21).
        let len = [65527, 65528, 65523, 65515, 65514, 70000][usize::from(x - 250)];
        vec![b'k'; len]
    }

    fn member(&self, b: &mut Bytes<'_>) -> Vec<u8> {
        let x = b.u8();
        match x % 8 {
            0 => {
                let n = usize::from(b.u8() % 32);
                b.take(n)
            }
            1 => format!("m{}", b.u8() % 64).into_bytes(),
            _ => b.pick(MEMBERS).to_vec(),
        }
    }

    fn int(&self, b: &mut Bytes<'_>) -> Vec<u8> {
        let x = b.u8();
        match x % 4 {
            0 => b.pick(INTS).as_bytes().to_vec(),
            1 => (b.u64() as i64).to_string().into_bytes(),
            2 => (i64::from(b.u8() as i8)).to_string().into_bytes(),
            _ => (b.u8() % 8).to_string().into_bytes(),
        }
    }

    fn float(&self, b: &mut Bytes<'_>) -> Vec<u8> {
        let x = b.u8();
        match x % 4 {
            0 | 1 => b.pick(FLOATS).as_bytes().to_vec(),
            2 => {
                let f = f64::from_bits(b.u64());
                if x & 4 == 0 {
                    format!("{f}").into_bytes()
                } else {
                    format!("{f:e}").into_bytes()
                }
            }
            _ => format!("{}", f64::from(b.u8() as i8) / 4.0).into_bytes(),
        }
    }

    /// Seconds or milliseconds since the epoch, near now or far off.
    fn time(&self, b: &mut Bytes<'_>) -> Vec<u8> {
        let x = b.u8();
        let s = self.now_s as i64;
        match x % 6 {
            0 => s - 10,
            1 => s + 1000,
            2 => (s + 1000) * 1000,
            3 => s * 1000 - 5,
            4 => i64::from(b.u8() as i8),
            _ => return self.int(b),
        }
        .to_string()
        .into_bytes()
    }

    /// A `DUMP` payload of the setup's, damaged or not, resealed with a
    /// valid checksum so the decoder behind it runs.
    fn payload(&self, b: &mut Bytes<'_>) -> Vec<u8> {
        let mut p = b.pick(self.payloads).clone();
        let how = b.u8();
        let at = usize::from(b.u8()) | (usize::from(b.u8()) << 8);
        let body = p.len().saturating_sub(10);
        match how % 8 {
            0 => return p,
            1 => {
                // Damaged and not resealed: the checksum must catch it.
                if !p.is_empty() {
                    let i = at % p.len();
                    p[i] ^= 1;
                }
                return p;
            }
            2..=4 if body > 0 => {
                let x = b.u8().max(1);
                p[at % body] ^= x;
            }
            5 if body > 0 => {
                // Truncated inside the body.
                let footer = p[body..].to_vec();
                p.truncate(at % body);
                p.extend_from_slice(&footer);
            }
            6 => {
                // Bytes inserted into the body.
                let n = usize::from(b.u8() % 16);
                let extra = b.take(n);
                let i = at % (body + 1);
                p.splice(i..i, extra);
            }
            _ => {
                // A length byte set to something large.
                if body > 1 {
                    p[1 + at % (body - 1)] =
                        b.pick(&[0x80u8, 0x81, 0x40, 0xff, 0xc0, 0xc3]).to_owned();
                }
            }
        }
        reseal(&mut p);
        p
    }

    /// One change to a grammatical command: an argument dropped,
    /// repeated, swapped or inserted.
    fn damage(&self, b: &mut Bytes<'_>, args: &mut Vec<Vec<u8>>) {
        if args.len() < 2 {
            return;
        }
        let i = 1 + usize::from(b.u8()) % (args.len() - 1);
        match b.u8() % 4 {
            0 => {
                args.remove(i);
            }
            1 => {
                let a = args[i].clone();
                args.insert(i, a);
            }
            2 => {
                let j = 1 + usize::from(b.u8()) % (args.len() - 1);
                args.swap(i, j);
            }
            _ => {
                let a = self.any(b);
                args.insert(i, a);
            }
        }
    }
}

/// The setup's keys of the type command `name` works on, by its ACL
/// categories in `COMMAND INFO`; none for a command of every type.
fn family(name: &str) -> &'static [&'static [u8]] {
    let acl = meta::find(name).map_or(&[][..], |m| m.acl);
    let families: [(&str, &'static [&'static [u8]]); 6] = [
        ("@list", &[b"l", b"L", b"n"]),
        ("@set", &[b"S", b"I", b"B", b"n"]),
        ("@sortedset", &[b"z", b"Z", b"n"]),
        ("@hash", &[b"h", b"H", b"n"]),
        ("@string", &[b"s", b"t", b"n"]),
        ("@bitmap", &[b"s", b"t", b"n"]),
    ];
    families
        .iter()
        .find(|(c, _)| acl.contains(c))
        .map_or(&[], |(_, keys)| keys)
}

fn field<'d>(d: &'d D, name: &str) -> Option<&'d D> {
    match d {
        D::M(m) => m.iter().find(|(k, _)| *k == name).map(|(_, v)| v),
        _ => None,
    }
}

fn text(d: &D) -> Option<&'static str> {
    match d {
        D::S(s) => Some(s),
        _ => None,
    }
}

fn strs(d: &D) -> Vec<&'static str> {
    match d {
        D::A(a) => a.iter().filter_map(text).collect(),
        _ => Vec::new(),
    }
}

fn doc_args(docs: &'static [(&'static str, D)]) -> Option<&'static [D]> {
    match docs.iter().find(|(k, _)| *k == "arguments") {
        Some((_, D::A(a))) => Some(a),
        _ => None,
    }
}

/// Recomputes a `DUMP` payload's CRC-64 (Redis's, over everything before
/// it).
fn reseal(p: &mut [u8]) {
    if p.len() < 10 {
        return;
    }
    let body = p.len() - 8;
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(&p[..body]);
    p[body..].copy_from_slice(&crc.to_le_bytes());
}

fn is(a: &[u8], word: &str) -> bool {
    a.eq_ignore_ascii_case(word.as_bytes())
}

/// Makes a command safe to run (module docs: what stops the loop or the
/// process is handled deliberately).
fn tame(args: &mut [Vec<u8>]) {
    let Some(name) = args.first() else {
        return;
    };
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    if EXCLUDED.contains(&name.as_str()) {
        args[0] = b"PING".to_vec();
        return;
    }
    match name.as_str() {
        "migrate" if args.len() > 2 => {
            // A closed port on loopback: refused at once.
            args[1] = b"127.0.0.1".to_vec();
            args[2] = b"1".to_vec();
        }
        "config" if args.len() > 2 && is(&args[1], "set") => {
            for a in &mut args[2..] {
                if ["requirepass", "maxclients", "timeout"]
                    .iter()
                    .any(|w| is(a, w))
                {
                    *a = b"slowlog-max-len".to_vec();
                }
            }
        }
        "wait" if args.len() > 2 => {
            // With no replica, WAIT holds its client until the timeout (in
            // ms, 0 for ever): at most 20 ms here; what does not parse stays.
            let t = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|s| s.parse::<i64>().ok());
            if t.is_some_and(|t| t == 0 || t > 20) {
                args[2] = b"20".to_vec();
            }
        }
        "srandmember" | "zrandmember" | "hrandfield" if args.len() > 2 => {
            let n = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|s| s.parse::<i64>().ok());
            if n.is_some_and(|n| (-i64::MAX..-10_000).contains(&n)) {
                args[2] = b"-1000".to_vec();
            }
        }
        _ => {}
    }
    if let Some((_, at)) = BLOCKING.iter().find(|(n, _)| *n == name) {
        let i = at.unwrap_or(args.len() - 1);
        if i >= 1 && i < args.len() {
            let pick = args[i].iter().fold(0usize, |h, &x| h * 31 + usize::from(x));
            args[i] = TIMEOUTS[pick % TIMEOUTS.len()].as_bytes().to_vec();
        }
    }
}

// ---------------------------------------------------------------------------
// The reply stream.

/// A reply, as parsed.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Set(Vec<Reply>),
    Double(String),
    Bool(bool),
    Big(String),
    Verbatim(Vec<u8>),
}

/// Why no reply came.
#[derive(Debug)]
enum NoReply {
    /// The server closed the connection.
    Closed,
    /// Not within [`REPLY_TIMEOUT`], or another I/O error.
    Io(String),
    /// Bytes that are not a well-formed reply.
    Bad(String),
}

impl std::fmt::Display for NoReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoReply::Closed => write!(f, "the server closed the connection"),
            NoReply::Io(e) => write!(f, "no reply: {e}"),
            NoReply::Bad(e) => write!(f, "malformed reply: {e}"),
        }
    }
}

/// A client connection: exact bytes out, strictly parsed replies in.
struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
    resp3: bool,
}

impl Conn {
    fn connect(addr: SocketAddr) -> Result<Conn, String> {
        let s = TcpStream::connect_timeout(&addr, REPLY_TIMEOUT).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| e.to_string())?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        Ok(Conn {
            w: s,
            r,
            resp3: false,
        })
    }

    fn send(&mut self, args: &[Vec<u8>]) -> Result<(), NoReply> {
        let mut v = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            v.extend_from_slice(a);
            v.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&v).map_err(|e| match e.kind() {
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset => NoReply::Closed,
            _ => NoReply::Io(e.to_string()),
        })
    }

    fn call(&mut self, args: &[Vec<u8>]) -> Result<Reply, NoReply> {
        self.send(args)?;
        self.read()
    }

    /// A command the checks need to succeed.
    fn must(&mut self, args: &[&[u8]]) -> Reply {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        match self.call(&args) {
            Ok(Reply::Error(e)) => panic!("{} failed: {e}", show(&args)),
            Ok(r) => r,
            Err(e) => panic!("{}: {e}", show(&args)),
        }
    }

    fn read(&mut self) -> Result<Reply, NoReply> {
        self.value(0)
    }

    fn line(&mut self) -> Result<Vec<u8>, NoReply> {
        let mut l = Vec::new();
        let n = (&mut self.r)
            .take(1 << 20)
            .read_until(b'\n', &mut l)
            .map_err(|e| match e.kind() {
                ErrorKind::ConnectionReset => NoReply::Closed,
                _ => NoReply::Io(e.to_string()),
            })?;
        if n == 0 {
            return Err(NoReply::Closed);
        }
        if !l.ends_with(b"\r\n") {
            return Err(NoReply::Bad(format!(
                "line not ended by CRLF: {:?}",
                l.escape_ascii().to_string()
            )));
        }
        l.truncate(l.len() - 2);
        if l.contains(&b'\r') || l.contains(&b'\n') {
            return Err(NoReply::Bad(format!(
                "CR or LF inside a line: {:?}",
                l.escape_ascii().to_string()
            )));
        }
        Ok(l)
    }

    fn exact(&mut self, n: usize) -> Result<Vec<u8>, NoReply> {
        let mut b = vec![0; n + 2];
        self.r.read_exact(&mut b).map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset => NoReply::Closed,
            _ => NoReply::Io(e.to_string()),
        })?;
        if !b.ends_with(b"\r\n") {
            return Err(NoReply::Bad("a string not ended by CRLF".into()));
        }
        b.truncate(n);
        Ok(b)
    }

    fn value(&mut self, depth: usize) -> Result<Reply, NoReply> {
        if depth > 32 {
            return Err(NoReply::Bad("replies nested deeper than 32".into()));
        }
        let l = self.line()?;
        let Some((&t, rest)) = l.split_first() else {
            return Err(NoReply::Bad("an empty line".into()));
        };
        let text = String::from_utf8(rest.to_vec())
            .map_err(|_| NoReply::Bad(format!("a non-UTF-8 header after {:?}", t as char)));
        let resp3_only = b"_,#!=(%~>|";
        if !self.resp3 && resp3_only.contains(&t) {
            return Err(NoReply::Bad(format!(
                "a RESP3 type {:?} on a RESP2 connection",
                t as char
            )));
        }
        let len = |s: &str, min: i64| -> Result<i64, NoReply> {
            match strict_int(s) {
                Some(n) if n >= min && n <= (64 << 20) => Ok(n),
                _ => Err(NoReply::Bad(format!("bad length {s:?}"))),
            }
        };
        Ok(match t {
            b'+' => Reply::Simple(text?),
            b'-' => {
                let e = text?;
                check_error(&e)?;
                Reply::Error(e)
            }
            b':' => {
                Reply::Int(strict_int(&text?).ok_or_else(|| NoReply::Bad("bad integer".into()))?)
            }
            b'$' => match len(&text?, -1)? {
                -1 => Reply::Null,
                n => Reply::Bulk(self.exact(n as usize)?),
            },
            b'*' => match len(&text?, -1)? {
                -1 => Reply::Null,
                n => Reply::Array(
                    (0..n)
                        .map(|_| self.value(depth + 1))
                        .collect::<Result<_, _>>()?,
                ),
            },
            b'_' if rest.is_empty() => Reply::Null,
            b',' => {
                let s = text?;
                let ok = matches!(s.as_str(), "inf" | "-inf" | "nan")
                    || (s.parse::<f64>().is_ok_and(f64::is_finite)
                        && !s.starts_with('+')
                        && !s.contains(char::is_whitespace));
                if !ok {
                    return Err(NoReply::Bad(format!("bad double {s:?}")));
                }
                Reply::Double(s)
            }
            b'#' => match rest {
                b"t" => Reply::Bool(true),
                b"f" => Reply::Bool(false),
                _ => return Err(NoReply::Bad("bad boolean".into())),
            },
            b'!' => {
                let n = len(&text?, 0)?;
                let e = String::from_utf8(self.exact(n as usize)?)
                    .map_err(|_| NoReply::Bad("a non-UTF-8 error".into()))?;
                check_error(&e)?;
                Reply::Error(e)
            }
            b'=' => {
                let n = len(&text?, 4)?;
                let v = self.exact(n as usize)?;
                if v[3] != b':' {
                    return Err(NoReply::Bad("a verbatim string without its format".into()));
                }
                Reply::Verbatim(v)
            }
            b'(' => {
                let s = text?;
                let digits = s.strip_prefix('-').unwrap_or(&s);
                if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(NoReply::Bad(format!("bad big number {s:?}")));
                }
                Reply::Big(s)
            }
            b'%' => {
                let n = len(&text?, 0)?;
                let mut m = Vec::new();
                for _ in 0..n {
                    let k = self.value(depth + 1)?;
                    let v = self.value(depth + 1)?;
                    m.push((k, v));
                }
                Reply::Map(m)
            }
            b'~' => {
                let n = len(&text?, 0)?;
                Reply::Set(
                    (0..n)
                        .map(|_| self.value(depth + 1))
                        .collect::<Result<_, _>>()?,
                )
            }
            _ => {
                return Err(NoReply::Bad(format!(
                    "an unexpected reply type {:?}",
                    l.escape_ascii().to_string()
                )))
            }
        })
    }

    /// Ends the connection the way that leaves no `TIME_WAIT` on this side
    /// (the server closes first), so long runs do not run out of ports.
    fn close(mut self) {
        if self.send(&[b"QUIT".to_vec()]).is_ok() {
            let mut sink = Vec::new();
            let _ = self.r.read_to_end(&mut sink);
        }
    }
}

/// An integer as RESP writes one: `-` and digits, no leading zeros.
fn strict_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || s == "-0"
    {
        return None;
    }
    s.parse().ok()
}

/// An error reply starts with its code: an upper-case word.
fn check_error(e: &str) -> Result<(), NoReply> {
    let code = e.split(' ').next().unwrap_or("");
    if code.is_empty() || !code.bytes().all(|c| c.is_ascii_uppercase() || c == b'_') {
        return Err(NoReply::Bad(format!("an error without a code: {e:?}")));
    }
    Ok(())
}

fn show(args: &[Vec<u8>]) -> String {
    let mut s = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        if a.len() > 80 {
            s.push_str(&format!(
                "\"{}...\"({} bytes)",
                a[..40].escape_ascii(),
                a.len()
            ));
        } else {
            s.push_str(&format!("\"{}\"", a.escape_ascii()));
        }
    }
    s
}

fn short(r: &Reply) -> String {
    let s = format!("{r:?}");
    if s.chars().count() > 200 {
        format!("{}...", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

// ---------------------------------------------------------------------------
// The server.

/// An in-process server on 127.0.0.1:0.
struct Running {
    addr: SocketAddr,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<Result<(), weft_server::Error>>>,
}

impl Running {
    fn start(dir: &std::path::Path) -> Running {
        let mut c = Config::default();
        c.port = 0;
        c.dir = dir.join("db");
        c.save_dir = Some(dir.join("saves"));
        c.sync = SyncMode::No;
        c.threads = 1;
        c.busy_poll = Duration::ZERO;
        c.max_bulk = MAX_BULK;
        c.db_options = weft::Options::default().write_buffer_size(1 << 20);
        let server = Server::bind(c).unwrap();
        let addr = server.local_addr();
        let handle = server.shutdown_handle();
        let thread = Some(
            std::thread::Builder::new()
                .name("fuzz-server".into())
                .spawn(move || server.run())
                .unwrap(),
        );
        Running {
            addr,
            handle,
            thread,
        }
    }

    fn alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the server; what `run` returned, or why it did not stop.
    fn stop(mut self) -> Result<(), String> {
        self.handle.shutdown();
        let t = self.thread.take().ok_or("not running")?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while !t.is_finished() {
            if Instant::now() > deadline {
                // A loop stuck in a handler: leave it, report it.
                return Err("the server did not stop within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        match t.join() {
            Ok(r) => r.map_err(|e| format!("the server stopped with {e}")),
            Err(_) => Err("the server thread panicked".into()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.handle.shutdown();
            let t = self.thread.take();
            let deadline = Instant::now() + Duration::from_secs(20);
            while t.as_ref().is_some_and(|t| !t.is_finished()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if let Some(t) = t.filter(|t| t.is_finished()) {
                let _ = t.join();
            }
        }
    }
}

/// The server and what the generator takes from it; rebuilt after a
/// failed input, so one failure does not make every later input fail
/// (bolero replays inputs while it shrinks one).
struct Fixture {
    /// `None` only while a restart is under way.
    server: Option<Running>,
    payloads: Vec<Vec<u8>>,
    now_s: u64,
    // Last: removed after the server stopped.
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = crate::harness::scratch();
        let server = Running::start(dir.path());
        let mut c = Conn::connect(server.addr).unwrap();
        setup(&mut c, true);
        let mut payloads = Vec::new();
        for k in KEYS {
            if let Reply::Bulk(p) = c.must(&[b"DUMP", k]) {
                payloads.push(p);
            }
        }
        c.close();
        assert!(payloads.len() >= 10, "DUMP of the setup's keys");
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Fixture {
            server: Some(server),
            payloads,
            now_s,
            dir,
        }
    }
}

impl Fixture {
    fn addr(&self) -> SocketAddr {
        self.server.as_ref().expect("a server").addr
    }

    fn alive(&self) -> bool {
        self.server.as_ref().is_some_and(Running::alive)
    }
}

/// A value of every type under the first keys of [`KEYS`] (`big`: and
/// collections of 300 under `L`, `B`, `Z`, `H`), after `FLUSHALL`.
fn setup(c: &mut Conn, big: bool) {
    let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut add = |a: &[&str]| cmds.push(a.iter().map(|s| s.as_bytes().to_vec()).collect());
    add(&["FLUSHALL"]);
    add(&["SET", "s", "10"]);
    add(&["SET", "t", "hello", "EX", "100000"]);
    add(&["RPUSH", "l", "a", "b", "c", "1", "a"]);
    add(&["SADD", "S", "a", "b", "1"]);
    add(&["SADD", "I", "1", "2", "-1"]);
    add(&[
        "ZADD", "z", "1", "a", "2", "b", "2.5", "c", "-inf", "lo", "+inf", "hi",
    ]);
    add(&["HSET", "h", "f", "1", "g", "x", "a", "1.5"]);
    add(&["PEXPIRE", "h", "100000000"]);
    if big {
        let n = 300;
        let mut push = vec!["RPUSH".to_string(), "L".into()];
        let mut sadd = vec!["SADD".to_string(), "B".into()];
        let mut zadd = vec!["ZADD".to_string(), "Z".into()];
        let mut hset = vec!["HSET".to_string(), "H".into()];
        for i in 0..n {
            push.push(format!("m{i}"));
            sadd.push(format!("m{i}"));
            zadd.push(format!("{}", i % 17));
            zadd.push(format!("m{i}"));
            hset.push(format!("m{i}"));
            hset.push(format!("{i}"));
        }
        for v in [push, sadd, zadd, hset] {
            cmds.push(v.into_iter().map(String::into_bytes).collect());
        }
    }
    for a in &cmds {
        match c.call(a) {
            Ok(Reply::Error(e)) => panic!("setup {}: {e}", show(a)),
            Ok(_) => {}
            Err(e) => panic!("setup {}: {e}", show(a)),
        }
    }
}

// ---------------------------------------------------------------------------
// Running a program and checking what it left.

/// What the programs got, for the summary a run prints (how much of the
/// handlers the inputs reach past the argument checks).
#[derive(Default)]
struct Tally {
    commands: u64,
    errors: u64,
    /// Error replies by their first words (`WEFT_FUZZ_VERBOSE=1`).
    by_error: BTreeMap<String, u64>,
    /// Replies that were not errors, by command.
    ok_by_command: BTreeMap<String, u64>,
    /// Error replies, by command.
    errors_by_command: BTreeMap<String, u64>,
}

static TALLY: Mutex<Option<Tally>> = Mutex::new(None);

fn tally(name: &str, r: &Reply) {
    let mut t = TALLY.lock().unwrap_or_else(|e| e.into_inner());
    let t = t.get_or_insert_with(Tally::default);
    t.commands += 1;
    if let Reply::Error(e) = r {
        t.errors += 1;
        let head: String = e.split(' ').take(5).collect::<Vec<_>>().join(" ");
        *t.by_error.entry(head).or_default() += 1;
        *t.errors_by_command.entry(name.to_string()).or_default() += 1;
    } else {
        *t.ok_by_command.entry(name.to_string()).or_default() += 1;
    }
}

fn print_tally() {
    let t = TALLY.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(t) = t else { return };
    eprintln!(
        "server_commands: {} commands, {:.0}% error replies, {} commands answered without an error",
        t.commands,
        100.0 * t.errors as f64 / t.commands.max(1) as f64,
        t.ok_by_command.len()
    );
    if std::env::var_os("WEFT_FUZZ_VERBOSE").is_some() {
        let mut e: Vec<_> = t.by_error.into_iter().collect();
        e.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        for (m, n) in e.iter().take(40) {
            eprintln!("  {n:8} -{m}");
        }
        let mut worst: Vec<(String, f64)> = (t.errors_by_command.iter())
            .filter(|(c, _)| COMMANDS.iter().any(|k| k.name == c.as_str()))
            .map(|(c, &e)| {
                let ok = t.ok_by_command.get(c).copied().unwrap_or(0);
                (c.clone(), e as f64 / (e + ok) as f64)
            })
            .collect();
        worst.sort_by(|a, b| b.1.total_cmp(&a.1));
        let worst: Vec<String> = (worst.iter().take(30))
            .map(|(c, r)| format!("{c} {:.0}%", r * 100.0))
            .collect();
        eprintln!("  most often refused: {}", worst.join(", "));
        let never: Vec<&str> = COMMANDS
            .iter()
            .map(|c| c.name)
            .filter(|c| !t.ok_by_command.contains_key(*c))
            .collect();
        eprintln!("  never answered without an error: {never:?}");
    }
}

/// Runs `p` against the fixture's server; panics (with the program and
/// what it got so far) on a broken rule.
fn run(fx: &mut Fixture, p: &Program) {
    let mut log = Vec::new();
    let fail = |log: &[String], why: String| -> ! {
        let start = log.len().saturating_sub(60);
        panic!(
            "{why}\nprogram (resp3 {}, big {}, restart {}), last steps:\n{}",
            p.resp3,
            p.big,
            p.restart,
            log[start..].join("\n")
        )
    };
    let addr = fx.addr();
    let mut c = Conn::connect(addr).unwrap_or_else(|e| fail(&log, format!("connect: {e}")));
    setup(&mut c, p.big);
    if p.resp3 {
        c.resp3 = true;
        match c.call(&[b"HELLO".to_vec(), b"3".to_vec()]) {
            Ok(Reply::Map(_)) => c.resp3 = true,
            other => fail(&log, format!("HELLO 3: {other:?}")),
        }
    }
    let mut maybe_closed = false;
    let mut redis = Redis::connect(p);
    for args in &p.commands {
        log.push(format!("> {}", show(args)));
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        // HELLO replies in the protocol it switches to: read it as
        // either, then go by its shape.
        let was_resp3 = c.resp3;
        if name == "hello" {
            c.resp3 = true;
        }
        let mut reply = c.call(args);
        if matches!(reply, Err(NoReply::Closed)) && maybe_closed {
            // The last CLIENT KILL killed this connection.
            log.push("  (closed by the CLIENT KILL before: reconnected)".into());
            c = Conn::connect(addr).unwrap_or_else(|e| fail(&log, format!("reconnect: {e}")));
            reply = c.call(args);
        }
        maybe_closed = false;
        let reply = match reply {
            Ok(r) => r,
            Err(e) => fail(
                &log,
                format!(
                    "{e} (server {})",
                    if fx.alive() { "running" } else { "stopped" }
                ),
            ),
        };
        log.push(format!("< {}", short(&reply)));
        tally(&name, &reply);
        if let Some(r) = &mut redis {
            r.compare(args, &name, &reply, &log);
        }
        if std::env::var("WEFT_FUZZ_TRACE").is_ok_and(|t| t == name) {
            eprintln!("{}\n  {}", show(args), short(&reply));
        }
        match (name.as_str(), &reply) {
            ("hello", Reply::Map(_)) => c.resp3 = true,
            ("hello", Reply::Array(_)) => c.resp3 = false,
            ("hello", Reply::Error(_)) => c.resp3 = was_resp3,
            ("hello", r) => fail(&log, format!("HELLO answered {r:?}")),
            ("quit", Reply::Error(_)) => {}
            ("quit", _) => {
                // Closed after the reply: go on on a new connection.
                match c.read() {
                    Err(NoReply::Closed) => {}
                    other => fail(&log, format!("QUIT left the connection open: {other:?}")),
                }
                c = Conn::connect(addr).unwrap_or_else(|e| fail(&log, format!("reconnect: {e}")));
            }
            ("client", r)
                if args.len() > 1 && is(&args[1], "kill") && !matches!(r, Reply::Error(_)) =>
            {
                maybe_closed = true;
            }
            _ => {}
        }
    }
    // The connection still answers, and nothing was left unread.
    let _ = c.call(&[b"DISCARD".to_vec()]);
    let pong = match c.call(&[b"PING".to_vec()]) {
        Err(NoReply::Closed) if maybe_closed => {
            c = Conn::connect(addr).unwrap_or_else(|e| fail(&log, format!("reconnect: {e}")));
            c.call(&[b"PING".to_vec()])
        }
        r => r,
    };
    match pong {
        Ok(Reply::Simple(s)) if s == "PONG" => {}
        other => fail(&log, format!("PING after the program: {other:?}")),
    }
    c.close();
    if let Err(why) =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_store(fx, p.restart)))
    {
        let why = why
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| why.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        fail(&log, format!("store check: {why}"));
    }
}

/// `WEFT_FUZZ_REDIS=host:port`: each program also runs, in lockstep, on
/// a Redis there (a scratch `redis-server` 7 started with
/// `--proto-max-bulk-len 1mb` as the fuzzed server is: it is flushed),
/// and where
/// one server refuses a command the other accepts, or they answer
/// different integers or error codes, the run prints the program so far
/// (`redis divergence`). An aid to long runs, not a check: Weft departs
/// from Redis on purpose in places (`docs/DESIGN.md`). Comparison stops
/// at the first command whose effect is random or timed (`SPOP`, short
/// deadlines, `RESTORE` of Weft's payloads, ...), past which the stores
/// may differ legitimately.
struct Redis {
    c: Conn,
    comparing: bool,
}

impl Redis {
    fn connect(p: &Program) -> Option<Redis> {
        let addr: SocketAddr = std::env::var("WEFT_FUZZ_REDIS").ok()?.parse().ok()?;
        let mut c = Conn::connect(addr).ok()?;
        c.must(&[b"FLUSHALL"]);
        setup(&mut c, p.big);
        if p.resp3 {
            c.resp3 = true;
            c.must(&[b"HELLO", b"3"]);
        }
        Some(Redis { c, comparing: true })
    }

    fn compare(&mut self, args: &[Vec<u8>], name: &str, weft: &Reply, log: &[String]) {
        if !self.comparing {
            return;
        }
        // Commands whose effects may differ: compare nothing after them.
        const STOP: &[&str] = &[
            "spop",
            "restore",
            "migrate",
            "expire",
            "pexpire",
            "expireat",
            "pexpireat",
            "setex",
            "psetex",
            "getex",
            "set",
            "select",
            "hello",
            "quit",
            "client",
            "auth",
            "config",
            "save",
            "bgsave",
            "flushall",
            "flushdb",
            "swapdb",
            "move",
            "multi",
            "exec",
            "object",
        ];
        // Commands whose replies may differ: not compared.
        const SKIP: &[&str] = &[
            "srandmember",
            "zrandmember",
            "hrandfield",
            "randomkey",
            "info",
            "time",
            "command",
            "slowlog",
            "latency",
            "scan",
            "sscan",
            "hscan",
            "zscan",
            "lastsave",
            "dump",
            "wait",
            "weft.range",
            "debug",
            "memory",
            "pubsub",
            "dbsize",
            "ttl",
            "pttl",
            "expiretime",
            "pexpiretime",
            "zlexcount",
            "zrangebylex",
            "zrevrangebylex",
            "zremrangebylex",
            "zrange",
            "zrangestore",
        ];
        // What Weft bounds and Redis does not (LCS of two long strings),
        // or refuses by design (keys past 64 KiB, DB numbers but 0):
        // not sent.
        let departs = name == "lcs" || name == "copy" || args.iter().any(|a| a.len() > 60_000);
        if STOP.contains(&name) || departs {
            self.comparing = false;
            return;
        }
        let redis = match self.c.call(args) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("redis: {e} after {}", show(args));
                self.comparing = false;
                return;
            }
        };
        if !self.comparing || SKIP.contains(&name) || !COMMANDS.iter().any(|c| c.name == name) {
            return;
        }
        let code = |r: &Reply| match r {
            Reply::Error(e) => Some(e.split(' ').next().unwrap_or("").to_string()),
            _ => None,
        };
        let differ = match (weft, &redis) {
            (Reply::Int(a), Reply::Int(b)) => a != b,
            (a, b) => code(a) != code(b),
        };
        if differ {
            let start = log.len().saturating_sub(40);
            eprintln!(
                "redis divergence: Redis answered {}\n{}\n",
                short(&redis),
                log[start..].join("\n")
            );
            self.comparing = false;
        }
    }
}

/// The keys `KEYS *` lists once `DBSIZE` agrees with it (the expirer may
/// lag by its 100 ms period).
fn settled_keys(c: &mut Conn) -> BTreeSet<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let n = match c.must(&[b"DBSIZE"]) {
            Reply::Int(n) => n,
            r => panic!("DBSIZE: {r:?}"),
        };
        let keys: BTreeSet<Vec<u8>> = match c.must(&[b"KEYS", b"*"]) {
            Reply::Array(a) => a
                .into_iter()
                .map(|k| match k {
                    Reply::Bulk(k) => k,
                    k => panic!("KEYS: {k:?}"),
                })
                .collect(),
            r => panic!("KEYS: {r:?}"),
        };
        if n == keys.len() as i64 {
            return keys;
        }
        assert!(
            Instant::now() < deadline,
            "DBSIZE {n} but KEYS lists {} keys",
            keys.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn int(r: Reply, what: &str) -> i64 {
    match r {
        Reply::Int(n) => n,
        r => panic!("{what}: {r:?}"),
    }
}

fn array(r: Reply, what: &str) -> Vec<Reply> {
    match r {
        Reply::Array(a) => a,
        r => panic!("{what}: {r:?}"),
    }
}

/// The store's own account of itself, on a fresh RESP2 connection.
fn check_store(fx: &mut Fixture, restart: bool) {
    let mut c = Conn::connect(fx.addr()).unwrap();
    let keys = settled_keys(&mut c);
    let mut dumps = BTreeMap::new();
    for k in &keys {
        // Nothing expires while it is checked (nor over a restart).
        c.must(&[b"PERSIST", k]);
        let ty = match c.must(&[b"TYPE", k]) {
            Reply::Simple(t) => t,
            r => panic!("TYPE: {r:?}"),
        };
        let what = format!("{} key {:?}", ty, k.escape_ascii().to_string());
        let (n, listed) = match ty.as_str() {
            "none" => {
                // Expired between KEYS and PERSIST.
                assert_eq!(int(c.must(&[b"EXISTS", k]), "EXISTS"), 0, "{what}");
                continue;
            }
            "string" => {
                let n = int(c.must(&[b"STRLEN", k]), &what);
                let v = match c.must(&[b"GET", k]) {
                    Reply::Bulk(v) => v,
                    r => panic!("GET {what}: {r:?}"),
                };
                assert!(v.len() <= MAX_BULK, "{what}: {} bytes", v.len());
                (n, v.len())
            }
            "list" => (
                int(c.must(&[b"LLEN", k]), &what),
                array(c.must(&[b"LRANGE", k, b"0", b"-1"]), &what).len(),
            ),
            "set" => {
                let m = array(c.must(&[b"SMEMBERS", k]), &what);
                let distinct: BTreeSet<String> = m.iter().map(|x| format!("{x:?}")).collect();
                assert_eq!(distinct.len(), m.len(), "{what}: SMEMBERS repeats");
                (int(c.must(&[b"SCARD", k]), &what), m.len())
            }
            "hash" => (
                int(c.must(&[b"HLEN", k]), &what),
                array(c.must(&[b"HGETALL", k]), &what).len() / 2,
            ),
            "zset" => {
                let items = array(c.must(&[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"]), &what);
                let mut last: Option<(f64, Vec<u8>)> = None;
                for pair in items.chunks(2) {
                    let (Reply::Bulk(m), Reply::Bulk(s)) = (&pair[0], &pair[1]) else {
                        panic!("{what}: ZRANGE WITHSCORES {pair:?}");
                    };
                    let score: f64 = std::str::from_utf8(s).unwrap().parse().unwrap();
                    assert!(!score.is_nan(), "{what}: a NaN score");
                    if let Some((ls, lm)) = &last {
                        assert!(
                            (*ls, lm) < (score, m) || (*ls == score && lm < m),
                            "{what}: ZRANGE out of order at {:?}",
                            m.escape_ascii().to_string()
                        );
                    }
                    if items.len() <= 64 {
                        assert_eq!(
                            c.must(&[b"ZSCORE", k, m]),
                            Reply::Bulk(s.clone()),
                            "{what}: ZSCORE of {:?}",
                            m.escape_ascii().to_string()
                        );
                    }
                    last = Some((score, m.clone()));
                }
                (int(c.must(&[b"ZCARD", k]), &what), items.len() / 2)
            }
            t => panic!("{what}: unknown type {t:?}"),
        };
        assert_eq!(n, listed as i64, "{what}: its length vs its elements");
        if ty != "string" {
            assert!(n > 0, "{what}: an empty collection is kept");
        }
        if restart {
            dumps.insert(k.clone(), c.must(&[b"DUMP", k]));
        }
    }
    // Reset what a program may have changed for the next one.
    c.must(&[
        b"CONFIG",
        b"SET",
        b"slowlog-max-len",
        b"128",
        b"slowlog-log-slower-than",
        b"10000",
        b"latency-monitor-threshold",
        b"0",
        b"notify-keyspace-events",
        b"",
    ]);
    c.must(&[b"SLOWLOG", b"RESET"]);
    c.close();
    if !restart {
        return;
    }
    fx.server.take().unwrap().stop().unwrap();
    records::check_records(&fx.dir.path().join("db"));
    fx.server = Some(Running::start(fx.dir.path()));
    let mut c = Conn::connect(fx.addr()).unwrap();
    let again = settled_keys(&mut c);
    let kept: BTreeSet<Vec<u8>> = dumps.keys().cloned().collect();
    assert_eq!(again, kept, "the keys after a restart");
    for (k, d) in &dumps {
        assert_eq!(
            &c.must(&[b"DUMP", k]),
            d,
            "DUMP of {:?} after a restart",
            k.escape_ascii().to_string()
        );
    }
    c.close();
}

/// A program run against one server for the whole target (see the
/// module docs).
#[test]
fn server_commands() {
    let count = crate::harness::Count::new("server_commands");
    let fixture: Mutex<Option<Fixture>> = Mutex::new(None);
    bolero::check!(name = "server_commands")
        .with_test_time(crate::harness::test_time())
        .for_each(|input: &[u8]| {
            count.tick();
            // Taken out while it runs: a failing input drops it (and its
            // server), the next one starts a fresh one.
            let mut fx = fixture
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_else(Fixture::new);
            let mut g = Gen {
                payloads: &fx.payloads,
                now_s: fx.now_s,
                family: &[],
            };
            let p = g.program(input);
            run(&mut fx, &p);
            *fixture.lock().unwrap_or_else(|e| e.into_inner()) = Some(fx);
        });
    drop(fixture);
    print_tally();
}

/// An input that spells `commands` literally (tag 255: a name and
/// arguments, each a length byte and bytes), after header byte `header`
/// (bit 0: RESP3, bit 1: big collections, bits 2-5 all zero: stop,
/// check the records and restart after the program).
fn literal(header: u8, commands: &[&[&str]]) -> Vec<u8> {
    let mut v = vec![header];
    for c in commands {
        assert!(!c.is_empty() && c.len() <= 16);
        v.push(255);
        v.push((c.len() - 1) as u8);
        for a in *c {
            assert!(a.len() < 256);
            v.push(a.len() as u8);
            v.extend_from_slice(a.as_bytes());
        }
    }
    v
}

/// Writes this target's seed corpus (run by hand: `cargo test -p
/// weft-fuzz --release -- --ignored seed_corpus`): programs that reach
/// deep into each family, so libFuzzer starts from there.
#[test]
#[ignore]
fn write_server_commands_seed_corpus() {
    let d = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/__fuzz__/server_commands/corpus");
    std::fs::create_dir_all(&d).unwrap();
    let seeds: &[(&str, u8, &[&[&str]])] = &[
        (
            "zset",
            0x04,
            &[
                &["ZADD", "z", "NX", "CH", "3", "x", "-inf", "y"],
                &["ZADD", "z", "XX", "GT", "INCR", "2", "x"],
                &[
                    "ZRANGE",
                    "z",
                    "(1",
                    "+inf",
                    "BYSCORE",
                    "REV",
                    "LIMIT",
                    "0",
                    "2",
                    "WITHSCORES",
                ],
                &["ZRANGE", "z", "[a", "+", "BYLEX", "LIMIT", "1", "-1"],
                &[
                    "ZUNIONSTORE",
                    "u",
                    "2",
                    "z",
                    "Z",
                    "WEIGHTS",
                    "2",
                    "inf",
                    "AGGREGATE",
                    "MAX",
                ],
                &["ZINTER", "2", "z", "u", "WITHSCORES"],
                &["ZMPOP", "2", "n", "z", "MAX", "COUNT", "2"],
                &["ZRANDMEMBER", "z", "-5", "WITHSCORES"],
                &["ZREMRANGEBYLEX", "z", "-", "(c"],
                &["ZSCAN", "Z", "0", "MATCH", "m1*", "COUNT", "7"],
            ],
        ),
        (
            "list",
            0x06,
            &[
                &["LPUSH", "l", "x", "y"],
                &["LINSERT", "l", "BEFORE", "b", "q"],
                &["LPOS", "l", "a", "RANK", "-1", "COUNT", "0", "MAXLEN", "10"],
                &["LMOVE", "l", "L", "LEFT", "RIGHT"],
                &["LTRIM", "L", "5", "-5"],
                &["LREM", "L", "-2", "m7"],
                &["LMPOP", "2", "n", "l", "RIGHT", "COUNT", "3"],
                &["LSET", "l", "-1", "z"],
                &["BLPOP", "n", "l", "0.01"],
                &["RPOP", "l", "100"],
            ],
        ),
        (
            "set_hash",
            0x04,
            &[
                &["SINTERSTORE", "d", "S", "I", "B"],
                &["SMOVE", "S", "I", "a"],
                &["SPOP", "B", "5"],
                &["SRANDMEMBER", "I", "-7"],
                &["SINTERCARD", "2", "S", "I", "LIMIT", "1"],
                &["HINCRBYFLOAT", "h", "a", "1e308"],
                &["HINCRBYFLOAT", "h", "a", "1e308"],
                &["HRANDFIELD", "h", "-3", "WITHVALUES"],
                &["HSCAN", "H", "0", "MATCH", "m?", "NOVALUES"],
                &["SSCAN", "B", "0", "COUNT", "3"],
            ],
        ),
        (
            "strings_keys",
            0x05,
            &[
                &["SET", "s", "v", "PX", "100000", "NX", "GET"],
                &["SET", "s", "9223372036854775807", "KEEPTTL", "XX"],
                &["INCR", "s"],
                &["INCRBYFLOAT", "t", "nan"],
                &["SETRANGE", "t", "1000", "x"],
                &["SETBIT", "t", "4294967295", "1"],
                &["BITPOS", "t", "0", "-1", "-1", "BIT"],
                &["LCS", "s", "t", "IDX", "MINMATCHLEN", "1", "WITHMATCHLEN"],
                &["GETEX", "t", "EXAT", "1"],
                &["EXPIRE", "l", "100", "GT"],
                &["COPY", "z", "c", "REPLACE"],
                &["RENAME", "c", "t"],
                &["OBJECT", "ENCODING", "I"],
                &["SCAN", "0", "TYPE", "zset", "COUNT", "2"],
            ],
        ),
        (
            "restart_big",
            0x02,
            &[
                &["DEL", "L"],
                &["RENAME", "Z", "Z2"],
                &["COPY", "B", "B2"],
                &["PEXPIRE", "H", "1"],
                &["ZREMRANGEBYRANK", "Z2", "0", "100"],
                &["LTRIM", "L", "0", "10"],
            ],
        ),
        (
            "server",
            0x05,
            &[
                &["HELLO", "2", "SETNAME", "fuzz"],
                &["CLIENT", "LIST", "TYPE", "normal"],
                &[
                    "CONFIG",
                    "SET",
                    "slowlog-log-slower-than",
                    "0",
                    "slowlog-max-len",
                    "3",
                ],
                &["SLOWLOG", "GET", "-1"],
                &["COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "2", "a", "b"],
                &["INFO", "keyspace", "commandstats"],
                &["CLIENT", "KILL", "SKIPME", "no", "USER", "default"],
                &["PING", "x"],
                &["QUIT"],
                &["DBSIZE"],
            ],
        ),
    ];
    for (name, header, commands) in seeds {
        std::fs::write(d.join(name), literal(*header, commands)).unwrap();
    }
}

/// A literal program decodes to its own commands (the tail adds more
/// after them), with its header's flags.
#[test]
fn literal_programs_decode_to_themselves() {
    let payloads = vec![vec![0u8; 12]];
    let mut g = Gen {
        payloads: &payloads,
        now_s: 1,
        family: &[],
    };
    let cmds: &[&[&str]] = &[&["ZADD", "z", "1", "x"], &["GET", ""], &["PING"]];
    let p = g.program(&literal(0x07, cmds));
    assert!(p.resp3 && p.big && !p.restart);
    for (got, want) in p.commands.iter().zip(cmds) {
        let want: Vec<Vec<u8>> = want.iter().map(|a| a.as_bytes().to_vec()).collect();
        assert_eq!(got, &want);
    }
    assert!(p.commands.len() > cmds.len());
    let p = g.program(&literal(0x00, &[&["SHUTDOWN", "NOSAVE"]]));
    assert!(p.restart);
    assert_eq!(p.commands[0], vec![b"PING".to_vec(), b"NOSAVE".to_vec()]);
}
