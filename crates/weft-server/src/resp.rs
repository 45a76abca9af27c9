//! The RESP request parser (incremental) and reply writer (RESP2 and RESP3).
//!
//! Requests are RESP arrays of bulk strings (what every client sends) or
//! inline commands (`PING\r\n`, split like Redis's `sdssplitargs`, quotes
//! and escapes included). The parser keeps its state between calls, so a
//! frame that arrives in many reads is never re-parsed from its start and a
//! bulk string's payload is copied once. Every length is checked against
//! [`Limits`] *before* anything is allocated for it: a client announcing a
//! 4 GiB bulk or a million-element array gets an error, not an allocation.

use std::fmt;

/// Protocol limits (Redis's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string (`proto-max-bulk-len`, 512 MiB).
    pub max_bulk: usize,
    /// Most elements in one request array (1 Mi).
    pub max_args: usize,
    /// Longest inline request or header line (64 KiB).
    pub max_inline: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk: 512 << 20,
            max_args: 1 << 20,
            max_inline: 64 << 10,
        }
    }
}

/// A malformed request. The connection replies with this (Redis's words)
/// and is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*` followed by something that is not a count in range.
    InvalidMultibulkLength,
    /// `$` followed by something that is not a length in range.
    InvalidBulkLength,
    /// An array element that does not start with `$`.
    ExpectedDollar(u8),
    /// A bulk string not followed by CRLF.
    ExpectedCrlf,
    /// An inline request longer than the limit.
    TooBigInline,
    /// An array header line longer than the limit.
    TooBigMultibulkCount,
    /// A bulk header line longer than the limit.
    TooBigBulkCount,
    /// An inline request with an unterminated quote.
    UnbalancedQuotes,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ERR Protocol error: ")?;
        match self {
            ProtocolError::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            ProtocolError::InvalidBulkLength => f.write_str("invalid bulk length"),
            ProtocolError::ExpectedDollar(c) => {
                write!(f, "expected '$', got '{}'", char::from(*c).escape_default())
            }
            ProtocolError::ExpectedCrlf => f.write_str("expected CRLF after bulk string"),
            ProtocolError::TooBigInline => f.write_str("too big inline request"),
            ProtocolError::TooBigMultibulkCount => f.write_str("too big mbulk count string"),
            ProtocolError::TooBigBulkCount => f.write_str("too big bulk count string"),
            ProtocolError::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// One request: the command name and its arguments.
pub type Args = Vec<Vec<u8>>;

/// Most request vectors a parser keeps for reuse (see [`Parser::recycle`]).
const SPARE_ARGS: usize = 64;
/// Most bytes of argument buffers a parser keeps for reuse: a client that
/// once sent large values does not leave its connection holding them.
const SPARE_BYTES: usize = 64 << 10;

/// Incremental request parser. Feed it the unconsumed bytes; it advances
/// the position past what it consumed and keeps partial frames internally.
#[derive(Debug, Default)]
pub struct Parser {
    limits: Limits,
    args: Args,
    /// Elements still to read in the current array; `None` between frames.
    remaining: Option<usize>,
    /// Length of the bulk string whose header was read.
    bulk: Option<usize>,
    /// Payload bytes of the current frame held in `args`.
    held: usize,
    /// Emptied request vectors and argument buffers of consumed requests,
    /// reused so that a steady pipeline allocates nothing per request
    /// (four allocations and frees per `SET` otherwise, a visible share of
    /// the server's CPU under `redis-benchmark -P 16`).
    spare_args: Vec<Args>,
    /// Argument buffers, stacked so that the next request's arguments pop
    /// in the order the last one's were pushed (similar sizes meet).
    spare_bufs: Vec<Vec<u8>>,
    /// Capacity of `spare_bufs`, at most [`SPARE_BYTES`].
    spare_bytes: usize,
}

/// A header line (`*N` / `$N`) at the front of `rest`: `Ok(Some(i))` with
/// `rest[i..i + 2] == "\r\n"`, `Ok(None)` if incomplete. Only the first
/// `max + 2` bytes are examined, so the answer never depends on how the
/// bytes were split between reads.
fn header_line(rest: &[u8], max: usize) -> Result<Option<usize>, bool> {
    let window = &rest[..rest.len().min(max + 2)];
    match memchr_nl(window) {
        Some(i) if i > 0 && window[i - 1] == b'\r' => Ok(Some(i - 1)),
        Some(_) => Err(false),                        // bare LF: malformed
        None if window.len() == max + 2 => Err(true), // too long
        None => Ok(None),
    }
}

fn memchr_nl(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// Parses a RESP length: optional '-', ASCII digits, nothing else.
fn parse_len(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(d - b'0');
    }
    Some(if neg { -v } else { v })
}

impl Parser {
    /// A parser with these limits.
    pub fn new(limits: Limits) -> Self {
        Parser {
            limits,
            ..Default::default()
        }
    }

    /// Takes back a request [`Parser::next`] returned, once it is done
    /// with, so its buffers serve the next requests. Keeps at most
    /// `SPARE_BYTES` of buffers and `SPARE_ARGS` vectors; the rest are
    /// freed.
    pub fn recycle(&mut self, mut args: Args) {
        while let Some(mut b) = args.pop() {
            if self.spare_bytes + b.capacity() <= SPARE_BYTES {
                self.spare_bytes += b.capacity();
                b.clear();
                self.spare_bufs.push(b);
            }
        }
        if self.spare_args.len() < SPARE_ARGS && args.capacity() <= 64 {
            self.spare_args.push(args);
        }
    }

    /// Payload bytes of the incomplete frame held by the parser.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Bytes the current bulk string still needs beyond `available`, if a
    /// bulk header was read (lets the reader size its buffer once).
    pub fn pending_bulk(&self) -> Option<usize> {
        self.bulk.map(|n| n + 2)
    }

    /// Parses the next complete request from `buf[*pos..]`. `Ok(None)`: more
    /// bytes are needed (everything usable was consumed).
    pub fn next(&mut self, buf: &[u8], pos: &mut usize) -> Result<Option<Args>, ProtocolError> {
        loop {
            let remaining = match self.remaining {
                Some(r) => r,
                None => {
                    let rest = &buf[*pos..];
                    let Some(&first) = rest.first() else {
                        return Ok(None);
                    };
                    if first == b'*' {
                        let end = match header_line(rest, self.limits.max_inline) {
                            Ok(Some(end)) => end,
                            Ok(None) => return Ok(None),
                            Err(true) => return Err(ProtocolError::TooBigMultibulkCount),
                            Err(false) => return Err(ProtocolError::InvalidMultibulkLength),
                        };
                        let n = parse_len(&rest[1..end])
                            .filter(|&n| n <= self.limits.max_args as i64)
                            .ok_or(ProtocolError::InvalidMultibulkLength)?;
                        *pos += end + 2;
                        if n <= 0 {
                            continue; // an empty array is skipped, as Redis does
                        }
                        self.remaining = Some(n as usize);
                        self.args = self.spare_args.pop().unwrap_or_default();
                        self.args.reserve((n as usize).min(64));
                        self.held = 0;
                        continue;
                    }
                    let window = &rest[..rest.len().min(self.limits.max_inline + 1)];
                    let Some(nl) = memchr_nl(window) else {
                        if window.len() > self.limits.max_inline {
                            return Err(ProtocolError::TooBigInline);
                        }
                        return Ok(None);
                    };
                    let mut line = &rest[..nl];
                    if let Some(l) = line.strip_suffix(b"\r") {
                        line = l;
                    }
                    let args = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
                    *pos += nl + 1;
                    if args.is_empty() {
                        continue;
                    }
                    return Ok(Some(args));
                }
            };
            if remaining == 0 {
                self.remaining = None;
                self.held = 0;
                return Ok(Some(std::mem::take(&mut self.args)));
            }
            let rest = &buf[*pos..];
            match self.bulk {
                None => {
                    let Some(&first) = rest.first() else {
                        return Ok(None);
                    };
                    if first != b'$' {
                        return Err(ProtocolError::ExpectedDollar(first));
                    }
                    let end = match header_line(rest, self.limits.max_inline) {
                        Ok(Some(end)) => end,
                        Ok(None) => return Ok(None),
                        Err(true) => return Err(ProtocolError::TooBigBulkCount),
                        Err(false) => return Err(ProtocolError::InvalidBulkLength),
                    };
                    let n = parse_len(&rest[1..end])
                        .filter(|&n| n >= 0 && n <= self.limits.max_bulk as i64)
                        .ok_or(ProtocolError::InvalidBulkLength)?;
                    *pos += end + 2;
                    self.bulk = Some(n as usize);
                }
                Some(n) => {
                    if rest.len() < n + 2 {
                        return Ok(None);
                    }
                    if &rest[n..n + 2] != b"\r\n" {
                        return Err(ProtocolError::ExpectedCrlf);
                    }
                    let arg = match self.spare_bufs.pop() {
                        Some(mut b) => {
                            self.spare_bytes -= b.capacity();
                            b.extend_from_slice(&rest[..n]);
                            b
                        }
                        None => rest[..n].to_vec(),
                    };
                    self.args.push(arg);
                    self.held += n;
                    *pos += n + 2;
                    self.bulk = None;
                    self.remaining = Some(remaining - 1);
                }
            }
        }
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Splits an inline request like Redis's `sdssplitargs`: whitespace
/// separates arguments; `"..."` supports `\n \r \t \b \a \\ \" \xHH`; `'...'`
/// supports `\'`; a closing quote must be followed by whitespace or the end.
/// `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Args> {
    let mut out = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < n && line[i + 1] == b'x' {
                    if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                        cur.push(h * 16 + l);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
                i += 1;
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    cur.push(b'\'');
                    i += 2;
                    continue;
                } else if c == b'\'' {
                    if i + 1 < n && !line[i + 1].is_ascii_whitespace() {
                        return None;
                    }
                    i += 1;
                    break;
                }
                cur.push(c);
                i += 1;
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    c if c.is_ascii_whitespace() => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
                i += 1;
            }
        }
        out.push(cur);
    }
}

/// Reply writer: appends RESP2 or RESP3 replies to a buffer.
#[derive(Debug, Default)]
pub struct Out {
    /// The encoded replies not yet written to the socket.
    pub buf: Vec<u8>,
    /// Speak RESP3 (after `HELLO 3`).
    pub resp3: bool,
}

impl Out {
    fn line(&mut self, prefix: u8, n: i64) {
        self.buf.push(prefix);
        push_decimal(&mut self.buf, n);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// A simple string (must contain no CR/LF).
    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An error reply; `msg` starts with its code (`ERR ...`). CR and LF are
    /// replaced by spaces, as Redis does.
    pub fn error(&mut self, msg: &str) {
        self.buf.push(b'-');
        self.buf.extend(
            msg.bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
    }

    /// An integer.
    pub fn int(&mut self, n: i64) {
        self.line(b':', n);
    }

    /// A bulk string.
    pub fn bulk(&mut self, b: &[u8]) {
        self.line(b'$', b.len() as i64);
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// The null reply (`$-1` in RESP2, `_` in RESP3).
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// The null array (`*-1` in RESP2, `_` in RESP3).
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    /// A bulk string or null.
    pub fn opt_bulk(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => self.bulk(b),
            None => self.null(),
        }
    }

    /// An array header of `n` elements.
    pub fn array(&mut self, n: usize) {
        self.line(b'*', n as i64);
    }

    /// A push header of `n` elements (RESP3 `>`; RESP2: an array):
    /// pub/sub messages and subscription replies.
    pub fn push(&mut self, n: usize) {
        self.line(if self.resp3 { b'>' } else { b'*' }, n as i64);
    }

    /// A set header of `n` elements (RESP3 `~`, RESP2 an array).
    pub fn set(&mut self, n: usize) {
        self.line(if self.resp3 { b'~' } else { b'*' }, n as i64);
    }

    /// A double as Redis 7.0 replies one (`addReplyDouble`): RESP3 `,`,
    /// RESP2 a bulk string; `%.17g`, with `inf` and `-inf` spelled so.
    pub fn double(&mut self, d: f64) {
        let text = format_double(d);
        if self.resp3 {
            self.buf.push(b',');
            self.buf.extend_from_slice(text.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text.as_bytes());
        }
    }

    /// A map header of `n` pairs (RESP2: an array of `2n`).
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            self.line(b'%', n as i64);
        } else {
            self.line(b'*', 2 * n as i64);
        }
    }

    /// A verbatim text (RESP3 `=`, RESP2 bulk).
    pub fn verbatim(&mut self, text: &str) {
        if self.resp3 {
            self.line(b'=', text.len() as i64 + 4);
            self.buf.extend_from_slice(b"txt:");
        } else {
            self.line(b'$', text.len() as i64);
        }
        self.buf.extend_from_slice(text.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }
}

/// A double in C's `%.17g` (what Redis 7.0 replies and stores as text):
/// 17 significant digits, scientific notation below 1e-4 and from 1e17,
/// trailing zeros dropped; `inf`, `-inf`, `nan` spelled as Redis does.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d.is_nan() {
        return "nan".into();
    }
    if d == 0.0 {
        return if d.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // `{:.16e}` is the 17 significant digits %.17g rounds to, with the
    // decimal exponent %g uses to pick a style.
    let sci = format!("{d:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if !(-4..17).contains(&exp) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        out.push_str(&e.to_string());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
    out
}

/// Appends `n` in decimal to `out` (every integer reply, bulk length and
/// array header: no allocation of its own).
fn push_decimal(out: &mut Vec<u8>, n: i64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut u = n.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Args>, ProtocolError> {
        let mut p = Parser::new(Limits::default());
        let mut pos = 0;
        let mut out = Vec::new();
        while let Some(a) = p.next(input, &mut pos)? {
            out.push(a);
        }
        Ok(out)
    }

    /// `%.17g` from the C library, the reference.
    fn c_format(d: f64) -> String {
        let mut buf = [0u8; 64];
        // SAFETY: `buf` is writable for its length, which is passed as the
        // limit; the format is a NUL-terminated literal taking one double.
        let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17g".as_ptr(), d) };
        String::from_utf8(buf[..n as usize].to_vec()).unwrap()
    }

    #[test]
    fn doubles_format_as_c_does() {
        let mut samples = vec![
            0.0,
            1.0,
            -1.0,
            1.1,
            0.1,
            1.5,
            100.0,
            1e16,
            1e17,
            1.5e17,
            123456789012345678.0,
            1e-4,
            1.5e-4,
            1e-5,
            0.00012345,
            -2.5e-7,
            1e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            3.0 / 7.0,
            -123.456,
            9007199254740993.0,
            0.3,
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = f64::from_bits(x);
            if d.is_finite() {
                samples.push(d);
            }
            samples.push((x % 2_000_001) as f64 / 1000.0 - 1000.0);
        }
        for d in samples {
            assert_eq!(format_double(d), c_format(d), "{d:e}");
        }
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
    }

    fn v(items: &[&str]) -> Args {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn arrays_and_pipelines() {
        let r = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n").unwrap();
        assert_eq!(r, vec![v(&["GET", "k"]), v(&["PING"])]);
        // Empty arrays are skipped; empty bulk strings are arguments.
        let r = parse_all(b"*0\r\n*-1\r\n*2\r\n$3\r\nSET\r\n$0\r\n\r\n").unwrap();
        assert_eq!(r, vec![v(&["SET", ""])]);
    }

    #[test]
    fn recycled_buffers_parse_the_same_and_stay_bounded() {
        // Requests of changing shapes and sizes, one large: each is handed
        // back before the next is parsed, as a connection does.
        let mut input = Vec::new();
        let mut want = Vec::new();
        for i in 0..200usize {
            let value = "v".repeat(if i == 99 { 3 * SPARE_BYTES } else { i % 37 });
            let req: Vec<String> = match i % 3 {
                0 => vec!["SET".into(), format!("key:{i}"), value],
                1 => vec!["GET".into(), format!("k{i}")],
                _ => vec!["MSET".into(), "a".into(), value.clone(), "bb".into(), value],
            };
            input.extend_from_slice(format!("*{}\r\n", req.len()).as_bytes());
            for a in &req {
                input.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
            }
            want.push(req.iter().map(|s| s.as_bytes().to_vec()).collect::<Args>());
        }
        let mut p = Parser::new(Limits::default());
        let mut pos = 0;
        for w in &want {
            let got = p.next(&input, &mut pos).unwrap().unwrap();
            assert_eq!(&got, w);
            p.recycle(got);
            let kept: usize = p.spare_bufs.iter().map(|b| b.capacity()).sum();
            assert_eq!(kept, p.spare_bytes);
            assert!(kept <= SPARE_BYTES, "{kept} spare bytes");
            assert!(p.spare_args.len() <= SPARE_ARGS);
        }
        assert_eq!(pos, input.len());
        assert!(!p.spare_bufs.is_empty(), "buffers are reused");
    }

    #[test]
    fn byte_at_a_time_equals_whole() {
        let input = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$11\r\nwo\r\nrld\x00\xff!!\r\nPING x\r\n";
        let whole = parse_all(input).unwrap();
        let mut p = Parser::new(Limits::default());
        let mut got = Vec::new();
        let mut buf = Vec::new();
        let mut pos = 0;
        for &b in input.iter() {
            buf.push(b);
            while let Some(a) = p.next(&buf, &mut pos).unwrap() {
                got.push(a);
            }
        }
        assert_eq!(got, whole);
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0][2], b"wo\r\nrld\x00\xff!!");
    }

    #[test]
    fn inline_commands() {
        let r = parse_all(b"PING\r\nset a \"b c\\x41\\n\"\r\n  \r\nget 'it\\'s'\n").unwrap();
        assert_eq!(
            r,
            vec![
                v(&["PING"]),
                v(&["set", "a", "b cA\n"]),
                v(&["get", "it's"])
            ]
        );
        assert_eq!(
            parse_all(b"set \"a\r\n"),
            Err(ProtocolError::UnbalancedQuotes)
        );
        assert_eq!(
            parse_all(b"set \"a\"b\r\n"),
            Err(ProtocolError::UnbalancedQuotes)
        );
    }

    #[test]
    fn errors_in_redis_words() {
        let e = |b: &[u8]| parse_all(b).unwrap_err().to_string();
        assert_eq!(e(b"*x\r\n"), "ERR Protocol error: invalid multibulk length");
        assert_eq!(
            e(b"*2000000\r\n"),
            "ERR Protocol error: invalid multibulk length"
        );
        assert_eq!(
            e(b"*1\r\n+x\r\n"),
            "ERR Protocol error: expected '$', got '+'"
        );
        assert_eq!(
            e(b"*1\r\n$-5\r\n"),
            "ERR Protocol error: invalid bulk length"
        );
        assert_eq!(
            e(b"*1\r\n$99999999999\r\n"),
            "ERR Protocol error: invalid bulk length"
        );
        assert_eq!(
            e(b"*1\r\n$1\r\nabc"),
            "ERR Protocol error: expected CRLF after bulk string"
        );
        let big = vec![b'a'; 70_000];
        assert_eq!(e(&big), "ERR Protocol error: too big inline request");
    }

    #[test]
    fn lower_bulk_limit() {
        let mut p = Parser::new(Limits {
            max_bulk: 4,
            ..Limits::default()
        });
        let mut pos = 0;
        assert_eq!(
            p.next(b"*1\r\n$5\r\nhello\r\n", &mut pos),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn replies() {
        let mut o = Out::default();
        o.int(-42);
        o.bulk(b"x");
        o.null();
        o.map(1);
        o.error("ERR a\r\nb");
        assert_eq!(o.buf, b":-42\r\n$1\r\nx\r\n$-1\r\n*2\r\n-ERR a  b\r\n");
        let mut o = Out {
            resp3: true,
            ..Out::default()
        };
        o.null();
        o.map(2);
        o.int(i64::MIN);
        assert_eq!(o.buf, b"_\r\n%2\r\n:-9223372036854775808\r\n");
    }

    /// Bounded randomized test (runs in CI; the fuzz target explores more):
    /// random and mutated frames never panic, and splitting the input
    /// anywhere never changes the result.
    #[test]
    fn randomized_frames_never_panic_and_split_anywhere() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        let seeds: [&[u8]; 5] = [
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n",
            b"PING \"a\\x41\" 'b'\r\n",
            b"*1\r\n$4\r\nPING\r\n",
            b"*-1\r\n*0\r\n",
        ];
        let limits = Limits {
            max_bulk: 64,
            max_args: 16,
            max_inline: 128,
        };
        for _ in 0..20_000 {
            let mut input = Vec::new();
            for _ in 0..rng.gen_range(1..4) {
                input.extend_from_slice(seeds[rng.gen_range(0..seeds.len())]);
            }
            for _ in 0..rng.gen_range(0..4) {
                if input.is_empty() {
                    break;
                }
                let i = rng.gen_range(0..input.len());
                match rng.gen_range(0..4) {
                    0 => input[i] = rng.gen(),
                    1 => {
                        input.remove(i);
                    }
                    2 => input.insert(i, b"*$\r\n-0123456789"[rng.gen_range(0..15)]),
                    _ => input.truncate(i),
                }
            }
            if rng.gen_bool(0.1) {
                input = (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect();
            }
            let run = |chunks: &[&[u8]]| {
                let mut p = Parser::new(limits);
                let mut buf = Vec::new();
                let mut pos = 0;
                let mut got = Vec::new();
                for c in chunks {
                    buf.extend_from_slice(c);
                    loop {
                        match p.next(&buf, &mut pos) {
                            Ok(Some(a)) => {
                                assert!(a.len() <= limits.max_args);
                                assert!(a.iter().all(|x| x.len() <= limits.max_bulk.max(128)));
                                got.push(a)
                            }
                            Ok(None) => break,
                            Err(e) => return (got, Some(e)),
                        }
                    }
                    assert!(pos <= buf.len());
                }
                (got, None)
            };
            let whole = run(&[&input]);
            let cut = rng.gen_range(0..=input.len());
            let split = run(&[&input[..cut], &input[cut..]]);
            assert_eq!(
                whole,
                split,
                "input {:?} cut at {cut}",
                input.escape_ascii().to_string()
            );
        }
    }
}
