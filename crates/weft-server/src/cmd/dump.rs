//! `DUMP`, `RESTORE` and `MIGRATE` in Redis's own serialization: a value
//! as one RDB object (a type byte, then the object), then the RDB version
//! (2 bytes, little-endian) and a CRC-64/Jones of everything before it
//! (8 bytes, little-endian), as Redis 7's `createDumpPayload` writes it.
//!
//! - `RESTORE` reads what Redis 7.0 and 7.2 `DUMP` (RDB versions up to
//!   11): strings (plain, integer-encoded, LZF-compressed), lists (plain,
//!   ziplist, quicklist of ziplists, quicklist of listpacks or plain
//!   nodes), sets (plain, intset, listpack), sorted sets (plain with text
//!   or binary scores, ziplist, listpack), hashes (plain, ziplist,
//!   listpack). Zipmaps (hashes of Redis before 2.6), streams and module
//!   types are refused with Redis's `Bad data format`, as is any payload
//!   that does not decode whole; a wrong version or checksum gets Redis's
//!   `DUMP payload version or checksum are wrong`.
//! - `DUMP` writes RDB version 10 (Redis 7.0), which every Redis from 7.0
//!   on restores, in the plain encodings Redis itself writes for big
//!   values (strings, integer-encoded where Redis would; lists as plain
//!   lists, sets, sorted sets with binary scores, hashes): the receiving
//!   Redis picks its small encodings when it loads them. Strings are not
//!   LZF-compressed (compression is optional in the format).
//!
//! LZF is decompressed here ([`lzf_decompress`], 40 lines): the one LZF
//! crate (`lzf` 1.0) is marked deprecated by its author, and the format is
//! small and fixed. The checksum is the `crc` crate's `CRC_64_REDIS`.

use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::value::{self, Value};
use super::{err, int_arg, is, CmdError, CmdResult, Ctx, SYNTAX};
use crate::keyspace::{now_ms, Batch};

/// The RDB version `DUMP` writes: Redis 7.0's.
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version `RESTORE` reads: Redis 7.2's.
const RDB_VERSION_READ: u16 = 11;

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

const BAD_FORMAT: &str = "ERR Bad data format";
const BAD_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";

// RDB object types (Redis's `rdb.h`).
const T_STRING: u8 = 0;
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_ZSET: u8 = 3;
const T_HASH: u8 = 4;
const T_ZSET_2: u8 = 5;
const T_LIST_ZIPLIST: u8 = 10;
const T_SET_INTSET: u8 = 11;
const T_ZSET_ZIPLIST: u8 = 12;
const T_HASH_ZIPLIST: u8 = 13;
const T_LIST_QUICKLIST: u8 = 14;
const T_HASH_LISTPACK: u8 = 16;
const T_ZSET_LISTPACK: u8 = 17;
const T_LIST_QUICKLIST_2: u8 = 18;
const T_SET_LISTPACK: u8 = 20;

// ---------------------------------------------------------------- writing

fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A string as Redis's `rdbSaveRawString` writes it without compression:
/// integer-encoded when it is the canonical text of an integer that fits
/// 32 bits (as Redis encodes short numeric strings), else length-prefixed.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(n) = super::parse_i64(s) {
            if let Ok(n) = i8::try_from(n) {
                out.push(0xC0);
                out.extend_from_slice(&n.to_le_bytes());
                return;
            }
            if let Ok(n) = i16::try_from(n) {
                out.push(0xC1);
                out.extend_from_slice(&n.to_le_bytes());
                return;
            }
            if let Ok(n) = i32::try_from(n) {
                out.push(0xC2);
                out.extend_from_slice(&n.to_le_bytes());
                return;
            }
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// The `DUMP` payload of `v`.
pub fn serialize(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match v {
        Value::String(s) => {
            out.push(T_STRING);
            put_string(&mut out, s);
        }
        Value::List(items) => {
            out.push(T_LIST);
            put_len(&mut out, items.len() as u64);
            for i in items {
                put_string(&mut out, i);
            }
        }
        Value::Set(items) => {
            out.push(T_SET);
            put_len(&mut out, items.len() as u64);
            for i in items {
                put_string(&mut out, i);
            }
        }
        Value::ZSet(items) => {
            out.push(T_ZSET_2);
            put_len(&mut out, items.len() as u64);
            // Redis writes a skiplist from its tail (highest score first).
            let mut sorted: Vec<&(Vec<u8>, f64)> = items.iter().collect();
            sorted.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
            for (m, s) in sorted {
                put_string(&mut out, m);
                out.extend_from_slice(&s.to_le_bytes());
            }
        }
        Value::Hash(items) => {
            out.push(T_HASH);
            put_len(&mut out, items.len() as u64);
            for (f, v) in items {
                put_string(&mut out, f);
                put_string(&mut out, v);
            }
        }
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC64.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

// ---------------------------------------------------------------- reading

/// Why a payload was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// Version newer than this build reads, or the checksum is wrong.
    VersionOrChecksum,
    /// The object does not decode (or is of a type Weft does not store).
    BadFormat,
}

type Res<T> = Result<T, PayloadError>;

/// A cursor over the object's bytes.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        if self.b.len() < n {
            return Err(PayloadError::BadFormat);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }

    fn byte(&mut self) -> Res<u8> {
        Ok(self.take(1)?[0])
    }

    /// A length, or `Err(Ok(kind))` style special encodings as `Special`.
    fn len_or_special(&mut self) -> Res<Len> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Len::N(u64::from(b & 0x3f)),
            1 => Len::N(u64::from(b & 0x3f) << 8 | u64::from(self.byte()?)),
            2 => match b {
                0x80 => Len::N(u64::from(u32::from_be_bytes(arr(self.take(4)?)?))),
                0x81 => Len::N(u64::from_be_bytes(arr(self.take(8)?)?)),
                _ => return Err(PayloadError::BadFormat),
            },
            _ => Len::Special(b & 0x3f),
        })
    }

    fn len(&mut self) -> Res<u64> {
        match self.len_or_special()? {
            Len::N(n) => Ok(n),
            Len::Special(_) => Err(PayloadError::BadFormat),
        }
    }

    /// A count of things each at least one byte long: bounded by what is
    /// left, so a corrupt count cannot make a huge allocation.
    fn count(&mut self) -> Res<usize> {
        let n = self.len()?;
        if n > self.b.len() as u64 {
            return Err(PayloadError::BadFormat);
        }
        Ok(n as usize)
    }

    fn string(&mut self) -> Res<Vec<u8>> {
        match self.len_or_special()? {
            Len::N(n) => {
                let n = usize::try_from(n).map_err(|_| PayloadError::BadFormat)?;
                Ok(self.take(n)?.to_vec())
            }
            Len::Special(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Len::Special(1) => Ok(i16::from_le_bytes(arr(self.take(2)?)?)
                .to_string()
                .into_bytes()),
            Len::Special(2) => Ok(i32::from_le_bytes(arr(self.take(4)?)?)
                .to_string()
                .into_bytes()),
            Len::Special(3) => {
                let clen = usize::try_from(self.len()?).map_err(|_| PayloadError::BadFormat)?;
                let ulen = usize::try_from(self.len()?).map_err(|_| PayloadError::BadFormat)?;
                let data = self.take(clen)?;
                lzf_decompress(data, ulen).ok_or(PayloadError::BadFormat)
            }
            Len::Special(_) => Err(PayloadError::BadFormat),
        }
    }
}

enum Len {
    N(u64),
    Special(u8),
}

fn arr<const N: usize>(b: &[u8]) -> Res<[u8; N]> {
    b.try_into().map_err(|_| PayloadError::BadFormat)
}

/// LZF decompression (liblzf's format, as Redis writes it): a control
/// byte below 32 copies the next `ctrl + 1` literal bytes; otherwise its
/// top 3 bits (7: plus a length byte) give a back-reference length − 2
/// and its low 5 bits and the next byte an offset − 1 into the output.
/// `None` if the data is corrupt or does not come to exactly `len` bytes.
pub fn lzf_decompress(data: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len.min(data.len().saturating_mul(64)));
    let mut i = 0;
    while i < data.len() {
        let ctrl = usize::from(data[i]);
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            out.extend_from_slice(data.get(i..i + n)?);
            i += n;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += usize::from(*data.get(i)?);
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + usize::from(*data.get(i)?) + 1;
            i += 1;
            let from = out.len().checked_sub(back)?;
            // Overlapping copies repeat bytes: one at a time.
            for k in 0..n + 2 {
                let b = out[from + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return None;
        }
    }
    (out.len() == len).then_some(out)
}

/// Checks the footer of a payload (`verifyDumpPayload`): at least 10
/// bytes, a version this build reads, a matching CRC-64. Returns the
/// object's bytes.
fn verify(p: &[u8]) -> Res<&[u8]> {
    if p.len() < 10 {
        return Err(PayloadError::VersionOrChecksum);
    }
    let (body, crc) = p.split_at(p.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    if version > RDB_VERSION_READ {
        return Err(PayloadError::VersionOrChecksum);
    }
    if CRC64.checksum(body).to_le_bytes() != crc {
        return Err(PayloadError::VersionOrChecksum);
    }
    Ok(&body[..body.len() - 2])
}

/// Decodes a `DUMP` payload into a value.
pub fn deserialize(p: &[u8]) -> Res<Value> {
    let body = verify(p)?;
    let mut r = Reader { b: body };
    let t = r.byte()?;
    let v = match t {
        T_STRING => Value::String(r.string()?),
        T_LIST => {
            let n = r.count()?;
            Value::List((0..n).map(|_| r.string()).collect::<Res<_>>()?)
        }
        T_SET => {
            let n = r.count()?;
            Value::Set((0..n).map(|_| r.string()).collect::<Res<_>>()?)
        }
        T_ZSET | T_ZSET_2 => {
            let n = r.count()?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let m = r.string()?;
                let s = if t == T_ZSET_2 {
                    f64::from_le_bytes(arr(r.take(8)?)?)
                } else {
                    text_score(&mut r)?
                };
                items.push((m, s));
            }
            Value::ZSet(items)
        }
        T_HASH => {
            let n = r.count()?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push((r.string()?, r.string()?));
            }
            Value::Hash(items)
        }
        T_LIST_ZIPLIST => Value::List(ziplist(&r.string()?)?),
        T_SET_INTSET => Value::Set(intset(&r.string()?)?),
        T_SET_LISTPACK => Value::Set(listpack(&r.string()?)?),
        T_ZSET_ZIPLIST | T_ZSET_LISTPACK => {
            let blob = r.string()?;
            let flat = if t == T_ZSET_ZIPLIST {
                ziplist(&blob)?
            } else {
                listpack(&blob)?
            };
            Value::ZSet(
                pairs(flat)?
                    .into_iter()
                    .map(|(m, s)| Ok((m, parse_score(&s)?)))
                    .collect::<Res<_>>()?,
            )
        }
        T_HASH_ZIPLIST | T_HASH_LISTPACK => {
            let blob = r.string()?;
            let flat = if t == T_HASH_ZIPLIST {
                ziplist(&blob)?
            } else {
                listpack(&blob)?
            };
            Value::Hash(pairs(flat)?)
        }
        T_LIST_QUICKLIST => {
            let n = r.count()?;
            let mut items = Vec::new();
            for _ in 0..n {
                items.extend(ziplist(&r.string()?)?);
            }
            Value::List(items)
        }
        T_LIST_QUICKLIST_2 => {
            let n = r.count()?;
            let mut items = Vec::new();
            for _ in 0..n {
                match r.len()? {
                    // A plain node: one big element.
                    1 => items.push(r.string()?),
                    2 => items.extend(listpack(&r.string()?)?),
                    _ => return Err(PayloadError::BadFormat),
                }
            }
            Value::List(items)
        }
        _ => return Err(PayloadError::BadFormat),
    };
    check(v)
}

/// Redis refuses empty collections, duplicate members or fields and NaN
/// scores in a payload; `-0` is stored as `0`.
fn check(v: Value) -> Res<Value> {
    if v.is_empty() {
        return Err(PayloadError::BadFormat);
    }
    let distinct = |mut keys: Vec<&[u8]>| {
        let n = keys.len();
        keys.sort_unstable();
        keys.dedup();
        keys.len() == n
    };
    let ok = match &v {
        Value::String(_) | Value::List(_) => true,
        Value::Set(m) => distinct(m.iter().map(|x| x.as_slice()).collect()),
        Value::Hash(m) => distinct(m.iter().map(|x| x.0.as_slice()).collect()),
        Value::ZSet(m) => {
            m.iter().all(|x| !x.1.is_nan()) && distinct(m.iter().map(|x| x.0.as_slice()).collect())
        }
    };
    if !ok {
        return Err(PayloadError::BadFormat);
    }
    Ok(match v {
        Value::ZSet(m) => Value::ZSet(m.into_iter().map(|(k, s)| (k, s + 0.0)).collect()),
        v => v,
    })
}

/// A score written as text (`RDB_TYPE_ZSET`): a length byte (253 NaN,
/// 254 +inf, 255 −inf) and the digits.
fn text_score(r: &mut Reader<'_>) -> Res<f64> {
    match r.byte()? {
        253 => Ok(f64::NAN),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        n => parse_score(r.take(usize::from(n))?),
    }
}

fn parse_score(s: &[u8]) -> Res<f64> {
    let t = std::str::from_utf8(s).map_err(|_| PayloadError::BadFormat)?;
    let v: f64 = match t {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        t => t.parse().map_err(|_| PayloadError::BadFormat)?,
    };
    Ok(v)
}

fn pairs(flat: Vec<Vec<u8>>) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
    if !flat.len().is_multiple_of(2) {
        return Err(PayloadError::BadFormat);
    }
    let mut it = flat.into_iter();
    let mut out = Vec::new();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

/// The entries of a ziplist (Redis before 7.0): a 10-byte header, entries
/// (previous length, encoding, data), 0xFF.
fn ziplist(z: &[u8]) -> Res<Vec<Vec<u8>>> {
    let bad = PayloadError::BadFormat;
    if z.len() < 11 || u32::from_le_bytes(arr(&z[..4])?) as usize != z.len() {
        return Err(bad);
    }
    let mut r = Reader { b: &z[10..] };
    let mut out = Vec::new();
    loop {
        let first = r.byte()?;
        if first == 0xFF {
            break;
        }
        if first == 0xFE {
            r.take(4)?;
        }
        let enc = r.byte()?;
        let item = match enc >> 6 {
            0 => r.take(usize::from(enc & 0x3f))?.to_vec(),
            1 => {
                let n = usize::from(enc & 0x3f) << 8 | usize::from(r.byte()?);
                r.take(n)?.to_vec()
            }
            2 => {
                let n = u32::from_be_bytes(arr(r.take(4)?)?) as usize;
                r.take(n)?.to_vec()
            }
            _ => {
                let n: i64 = match enc {
                    0xC0 => i16::from_le_bytes(arr(r.take(2)?)?).into(),
                    0xD0 => i32::from_le_bytes(arr(r.take(4)?)?).into(),
                    0xE0 => i64::from_le_bytes(arr(r.take(8)?)?),
                    0xF0 => {
                        let b = r.take(3)?;
                        (i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8).into()
                    }
                    0xFE => (r.byte()? as i8).into(),
                    0xF1..=0xFD => i64::from(enc & 0x0f) - 1,
                    _ => return Err(bad),
                };
                n.to_string().into_bytes()
            }
        };
        out.push(item);
    }
    if !r.b.is_empty() {
        return Err(bad);
    }
    Ok(out)
}

/// The entries of a listpack (Redis 7): a 6-byte header, entries
/// (encoding, data, back-length), 0xFF.
fn listpack(lp: &[u8]) -> Res<Vec<Vec<u8>>> {
    let bad = PayloadError::BadFormat;
    if lp.len() < 7 || u32::from_le_bytes(arr(&lp[..4])?) as usize != lp.len() {
        return Err(bad);
    }
    let mut r = Reader { b: &lp[6..] };
    let mut out = Vec::new();
    loop {
        let enc = r.byte()?;
        if enc == 0xFF {
            break;
        }
        let (item, size) = if enc & 0x80 == 0 {
            (i64::from(enc & 0x7f).to_string().into_bytes(), 1)
        } else if enc & 0xC0 == 0x80 {
            let n = usize::from(enc & 0x3f);
            (r.take(n)?.to_vec(), 1 + n)
        } else if enc & 0xE0 == 0xC0 {
            let u = i64::from(enc & 0x1f) << 8 | i64::from(r.byte()?);
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            (v.to_string().into_bytes(), 2)
        } else if enc & 0xF0 == 0xE0 {
            let n = usize::from(enc & 0x0f) << 8 | usize::from(r.byte()?);
            (r.take(n)?.to_vec(), 2 + n)
        } else {
            match enc {
                0xF0 => {
                    let n = u32::from_le_bytes(arr(r.take(4)?)?) as usize;
                    (r.take(n)?.to_vec(), 5 + n)
                }
                0xF1 => (
                    i16::from_le_bytes(arr(r.take(2)?)?)
                        .to_string()
                        .into_bytes(),
                    3,
                ),
                0xF2 => {
                    let b = r.take(3)?;
                    let v = i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8;
                    (v.to_string().into_bytes(), 4)
                }
                0xF3 => (
                    i32::from_le_bytes(arr(r.take(4)?)?)
                        .to_string()
                        .into_bytes(),
                    5,
                ),
                0xF4 => (
                    i64::from_le_bytes(arr(r.take(8)?)?)
                        .to_string()
                        .into_bytes(),
                    9,
                ),
                _ => return Err(bad),
            }
        };
        // The back-length: the entry's size in 7-bit groups.
        let backlen = match size {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        r.take(backlen)?;
        out.push(item);
    }
    if !r.b.is_empty() {
        return Err(bad);
    }
    Ok(out)
}

/// The members of an intset: encoding (2, 4 or 8 bytes), count, then the
/// sorted integers, little-endian.
fn intset(s: &[u8]) -> Res<Vec<Vec<u8>>> {
    let bad = PayloadError::BadFormat;
    if s.len() < 8 {
        return Err(bad);
    }
    let width = u32::from_le_bytes(arr(&s[..4])?) as usize;
    let n = u32::from_le_bytes(arr(&s[4..8])?) as usize;
    if !matches!(width, 2 | 4 | 8) || s.len() != 8 + width * n {
        return Err(bad);
    }
    Ok(s[8..]
        .chunks(width)
        .map(|c| {
            let v: i64 = match width {
                2 => i16::from_le_bytes([c[0], c[1]]).into(),
                4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]).into(),
                _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
            };
            v.to_string().into_bytes()
        })
        .collect())
}

// ---------------------------------------------------------------- commands

pub fn dump(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let ks = &ctx.ks();
    let (snap, opts) = super::coll::snapshot(ks);
    let Some(e) = ks.get(&a[1], &opts)? else {
        ctx.out.null();
        return Ok(());
    };
    let v = value::load(ks, &a[1], &e, Some(&snap))?;
    ctx.out.bulk(&serialize(&v));
    Ok(())
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`, in
/// the order Redis 7.0 checks them. `IDLETIME` and `FREQ` are checked and
/// otherwise ignored (Weft keeps no access clock or counter: `OBJECT`).
pub fn restore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (false, false);
    let mut i = 4;
    while i < a.len() {
        let more = i + 1 < a.len();
        if is(&a[i], "replace") {
            replace = true;
        } else if is(&a[i], "absttl") {
            absttl = true;
        } else if is(&a[i], "idletime") && more && !freq {
            if int_arg(&a[i + 1])? < 0 {
                return err("ERR Invalid IDLETIME value, must be >= 0");
            }
            idle = true;
            i += 1;
        } else if is(&a[i], "freq") && more && !idle {
            if !(0..=255).contains(&int_arg(&a[i + 1])?) {
                return err("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            freq = true;
            i += 1;
        } else {
            return err(SYNTAX);
        }
        i += 1;
    }
    let key = &a[1];
    let ks = &ctx.ks();
    let g = ks.locks().lock(key);
    let mut batch = Batch::new();
    let old = ks.load_for_write(key, &mut batch)?;
    if !replace && old.is_some() {
        ks.write(batch)?;
        return err("BUSYKEY Target key name already exists.");
    }
    let ttl = int_arg(&a[2])?;
    if ttl < 0 {
        return err("ERR Invalid TTL value, must be >= 0");
    }
    let v = match deserialize(&a[3]) {
        Ok(v) => v,
        Err(PayloadError::VersionOrChecksum) => return err(BAD_PAYLOAD),
        Err(PayloadError::BadFormat) => return err(BAD_FORMAT),
    };
    if let Some(e) = &old {
        ks.delete_into(&mut batch, key, &e.meta)?;
    }
    let expire_at = match ttl {
        0 => None,
        t if absttl => Some(t as u64),
        t => Some(now_ms().saturating_add(t as u64)),
    };
    // Already past its deadline: nothing is created (the old key, with
    // REPLACE, is deleted all the same).
    let stored = expire_at.is_none_or(|t| t > now_ms());
    if stored {
        value::store(ks, &mut batch, key, &v, expire_at);
    }
    ks.write(batch)?;
    drop(g);
    if stored {
        ctx.notify(crate::notify::GENERIC, "restore", key);
    } else if old.is_some() {
        ctx.notify(crate::notify::GENERIC, "del", key);
    }
    // A restored list or sorted set serves its blocked clients.
    super::coll::key_ready(ctx, key);
    ctx.out.ok();
    Ok(())
}

/// A target's reply line (`+OK`, `-ERR ...`), without its CRLF.
fn read_line(r: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut l = Vec::new();
    r.read_until(b'\n', &mut l)?;
    if !l.ends_with(b"\r\n") {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    l.truncate(l.len() - 2);
    Ok(l)
}

fn push_command(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

/// `MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw]
/// [AUTH2 user pw] [KEYS key...]`: sends each key that exists as a
/// `RESTORE` (remaining TTL in ms, the `DUMP` payload, `REPLACE` if
/// asked) to another Redis-protocol server, after `AUTH` and `SELECT db`,
/// over one blocking connection (`timeout` ms for connecting and for each
/// read and write, as Redis). Without `COPY` the keys the target accepted
/// are deleted here. The keys' stripe locks are held from the read to the
/// delete, so no write to them falls between; the event loop running the
/// command waits for the target meanwhile, as Redis's one thread does.
/// No connection cache: each `MIGRATE` connects afresh.
pub fn migrate(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<(Option<&[u8]>, &[u8])> = None;
    let mut keys: Vec<&[u8]> = vec![&a[3]];
    let mut i = 6;
    while i < a.len() {
        let more = a.len() - 1 - i;
        if is(&a[i], "copy") {
            copy = true;
        } else if is(&a[i], "replace") {
            replace = true;
        } else if is(&a[i], "auth") {
            if more < 1 {
                return err(SYNTAX);
            }
            auth = Some((None, &a[i + 1]));
            i += 1;
        } else if is(&a[i], "auth2") {
            if more < 2 {
                return err(SYNTAX);
            }
            auth = Some((Some(&a[i + 1]), &a[i + 2]));
            i += 2;
        } else if is(&a[i], "keys") {
            if !a[3].is_empty() {
                return err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string");
            }
            keys = a[i + 1..].iter().map(|k| k.as_slice()).collect();
            break;
        } else {
            return err(SYNTAX);
        }
        i += 1;
    }
    let timeout = int_arg(&a[5])?;
    let db = int_arg(&a[4])?;
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });

    let ks = &ctx.ks();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let _g = ks.locks().lock_many(sorted.iter().copied());
    let (snap, opts) = super::coll::snapshot(ks);
    let mut found = Vec::new();
    for k in &keys {
        if let Some(e) = ks.get(k, &opts)? {
            found.push((*k, e));
        }
    }
    if found.is_empty() {
        ctx.out.simple("NOKEY");
        return Ok(());
    }
    let mut buf = Vec::new();
    if let Some((user, pw)) = auth {
        match user {
            Some(u) => push_command(&mut buf, &[b"AUTH", u, pw]),
            None => push_command(&mut buf, &[b"AUTH", pw]),
        }
    }
    push_command(&mut buf, &[b"SELECT", db.to_string().as_bytes()]);
    let now = now_ms();
    let mut sent = Vec::new();
    for (k, e) in &found {
        let ttl = match e.meta.expire_at {
            None => 0,
            Some(t) if t <= now => continue,
            Some(t) => t - now,
        };
        let payload = serialize(&value::load(ks, k, e, Some(&snap))?);
        let ttl = ttl.to_string();
        let mut args: Vec<&[u8]> = vec![b"RESTORE", k, ttl.as_bytes(), &payload];
        if replace {
            args.push(b"REPLACE");
        }
        push_command(&mut buf, &args);
        sent.push((*k, e.meta));
    }
    let ioerr = |what: &str| {
        CmdError(Cow::Owned(format!(
            "IOERR error or timeout {what} to target instance"
        )))
    };
    let addr = std::str::from_utf8(&a[2])
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .and_then(|port| {
            let host = String::from_utf8_lossy(&a[1]).into_owned();
            (host.as_str(), port).to_socket_addrs().ok()?.next()
        });
    let connecting = || err("IOERR error or timeout connecting to the client");
    let Some(addr) = addr else {
        return connecting();
    };
    let mut stream = match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => s,
        // Redis's blocking connect waits for the socket to be writable
        // and does not look at the error, so a refused connection shows
        // as a failed write.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(ioerr("writing"))
        }
        Err(_) => return connecting(),
    };
    let _ = stream.set_nodelay(true);
    if stream.set_read_timeout(Some(timeout)).is_err()
        || stream.set_write_timeout(Some(timeout)).is_err()
        || stream.write_all(&buf).is_err()
    {
        return Err(ioerr("writing"));
    }
    let Ok(reader) = stream.try_clone() else {
        return Err(ioerr("reading"));
    };
    let mut reader = BufReader::new(reader);
    let mut target_err: Option<Vec<u8>> = None;
    let note = |line: Vec<u8>, target_err: &mut Option<Vec<u8>>| {
        if line.first() == Some(&b'-') && target_err.is_none() {
            *target_err = Some(line[1..].to_vec());
        }
    };
    let mut head = Vec::new();
    for _ in 0..usize::from(auth.is_some()) + 1 {
        match read_line(&mut reader) {
            Ok(l) => head.push(l),
            Err(_) => return Err(ioerr("reading")),
        }
    }
    for l in head {
        note(l, &mut target_err);
    }
    let mut batch = Batch::new();
    let mut socket_error = false;
    let mut deleted = Vec::new();
    for (k, meta) in &sent {
        match read_line(&mut reader) {
            Ok(l) => {
                let ok = l.first() != Some(&b'-') && target_err.is_none();
                note(l, &mut target_err);
                if ok && !copy {
                    ks.delete_into(&mut batch, k, meta)?;
                    deleted.push(k);
                }
            }
            Err(_) => {
                socket_error = true;
                break;
            }
        }
    }
    drop(snap);
    ks.write(batch)?;
    for k in deleted {
        ctx.notify(crate::notify::GENERIC, "del", k);
    }
    if let Some(e) = target_err {
        return Err(CmdError(Cow::Owned(format!(
            "ERR Target instance replied with error: {}",
            String::from_utf8_lossy(&e)
        ))));
    }
    if socket_error {
        return Err(ioerr("reading"));
    }
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_jones() {
        // Redis's crc64.c self-test: crc64(0, "123456789") = 0xe9c6d914c4b8d9ca.
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn lzf_literals_and_back_references() {
        // liblzf's output for 200 'a's after "aa": literal run, then
        // a long back-reference (the lzf crate's RDB regression case).
        let data = [1, 97, 97, 224, 187, 0, 1, 97, 97];
        let out = lzf_decompress(&data, 200).unwrap();
        assert_eq!(out, vec![b'a'; 200]);
        assert!(lzf_decompress(&data, 199).is_none());
        assert!(
            lzf_decompress(&[0x20, 0x00], 2).is_none(),
            "reference before the start"
        );
        assert!(
            lzf_decompress(&[5, b'a'], 6).is_none(),
            "literal past the end"
        );
    }

    #[test]
    fn values_round_trip() {
        let values = [
            Value::String(b"hello".to_vec()),
            Value::String(b"-12345".to_vec()),
            Value::String(b"0123".to_vec()),
            Value::String(vec![7; 20_000]),
            Value::List(vec![b"a".to_vec(), b"1".to_vec(), vec![0; 300]]),
            Value::Set(vec![b"x".to_vec(), b"-100000".to_vec()]),
            Value::ZSet(vec![
                (b"m".to_vec(), 1.5),
                (b"n".to_vec(), f64::NEG_INFINITY),
            ]),
            Value::Hash(vec![(b"f".to_vec(), b"v".to_vec())]),
        ];
        for v in values {
            let p = serialize(&v);
            let mut back = deserialize(&p).unwrap();
            if let (Value::ZSet(a), Value::ZSet(b)) = (&v, &mut back) {
                b.sort_by(|x, y| x.0.cmp(&y.0));
                assert_eq!(a, b);
                continue;
            }
            assert_eq!(back, v);
            let mut bad = p.clone();
            let n = bad.len();
            bad[n - 1] ^= 1;
            assert_eq!(deserialize(&bad), Err(PayloadError::VersionOrChecksum));
        }
    }

    #[test]
    fn small_encodings_decode() {
        // An intset of 16-bit integers: 1, -2, 300.
        let mut s = vec![2, 0, 0, 0, 3, 0, 0, 0];
        for v in [-2i16, 1, 300] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(
            intset(&s).unwrap(),
            vec![b"-2".to_vec(), b"1".to_vec(), b"300".to_vec()]
        );
        // A listpack of "ab", 5, -1, 1000.
        let mut lp = vec![0u8; 6];
        lp.extend_from_slice(&[0x82, b'a', b'b', 3]);
        lp.extend_from_slice(&[5, 1]);
        lp.extend_from_slice(&[0xDF, 0xFF, 2]); // 13-bit -1
        lp.extend_from_slice(&[0xC3, 0xE8, 2]); // 13-bit 1000
        lp.push(0xFF);
        let n = lp.len() as u32;
        lp[..4].copy_from_slice(&n.to_le_bytes());
        lp[4..6].copy_from_slice(&4u16.to_le_bytes());
        assert_eq!(
            listpack(&lp).unwrap(),
            vec![
                b"ab".to_vec(),
                b"5".to_vec(),
                b"-1".to_vec(),
                b"1000".to_vec()
            ]
        );
        // A ziplist of "x", 7 (immediate), -300 (int16).
        let mut zl = vec![0u8; 10];
        zl.extend_from_slice(&[0, 0x01, b'x']);
        zl.extend_from_slice(&[3, 0xF8]);
        zl.extend_from_slice(&[2, 0xC0]);
        zl.extend_from_slice(&(-300i16).to_le_bytes());
        zl.push(0xFF);
        let n = zl.len() as u32;
        zl[..4].copy_from_slice(&n.to_le_bytes());
        assert_eq!(
            ziplist(&zl).unwrap(),
            vec![b"x".to_vec(), b"7".to_vec(), b"-300".to_vec()]
        );
    }
}
