//! The bit operations of `GETBIT`, `SETBIT`, `BITCOUNT` and `BITPOS` on a
//! string's bytes, as Redis 7.0's `bitops.c` defines them: bit 0 is the
//! most significant bit of byte 0, a string is padded with zero bytes as
//! far as a write needs, ranges are in bytes or (`BIT`) in bits with
//! Redis's clamping of negative and out-of-range indexes. Pure functions,
//! checked against a bit-by-bit model in the tests below.

/// The value of bit `offset` of `s` (0 past the end).
pub fn get_bit(s: &[u8], offset: u64) -> u8 {
    let byte = (offset >> 3) as usize;
    match s.get(byte) {
        Some(b) => (b >> (7 - (offset & 7))) & 1,
        None => 0,
    }
}

/// Sets bit `offset` of `s` to `on`, growing `s` with zero bytes as
/// needed; returns the bit's old value.
pub fn set_bit(s: &mut Vec<u8>, offset: u64, on: bool) -> u8 {
    let byte = (offset >> 3) as usize;
    if s.len() <= byte {
        s.resize(byte + 1, 0);
    }
    let shift = 7 - (offset & 7);
    let old = (s[byte] >> shift) & 1;
    if on {
        s[byte] |= 1 << shift;
    } else {
        s[byte] &= !(1 << shift);
    }
    old
}

/// A `[start, end]` range as `BITCOUNT`/`BITPOS` take it, clamped as
/// Redis clamps it to `len` units (bytes, or bits with `BIT`): negative
/// indexes count from the end, both ends are clamped into the string.
/// `None` for an empty range.
fn clamp(len: i64, start: i64, end: i64) -> Option<(i64, i64)> {
    let mut s = if start < 0 { len + start } else { start };
    let mut e = if end < 0 { len + end } else { end };
    s = s.max(0);
    e = e.max(0);
    if e >= len {
        e = len - 1;
    }
    (s <= e).then_some((s, e))
}

/// `BITCOUNT`: the set bits of `s`, of the whole string (`range` none) or
/// of `[start, end]` in bytes (or bits when `bits`).
pub fn count(s: &[u8], range: Option<(i64, i64)>, bits: bool) -> u64 {
    let Some((start, end)) = range else {
        return s.iter().map(|b| u64::from(b.count_ones())).sum();
    };
    if start < 0 && end < 0 && start > end {
        return 0;
    }
    let unit = if bits { 8 } else { 1 };
    let Some((start, end)) = clamp(s.len() as i64 * unit, start, end) else {
        return 0;
    };
    if !bits {
        return s[start as usize..=end as usize]
            .iter()
            .map(|b| u64::from(b.count_ones()))
            .sum();
    }
    let (first, last) = ((start >> 3) as usize, (end >> 3) as usize);
    let mut n: u64 = s[first..=last]
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    // Drop the bits of the edge bytes outside the range.
    let head = !(0xffu8 >> (start & 7));
    let tail = 0xffu8.checked_shr(1 + (end & 7) as u32).unwrap_or(0);
    n -= u64::from((s[first] & head).count_ones());
    n -= u64::from((s[last] & tail).count_ones());
    n
}

/// `BITPOS`: the position (in bits from the start of the string) of the
/// first bit equal to `bit` in `s`, within `[start, end]` (bytes, or bits
/// with `bits`; `end` of `None` runs to the end of the string). A string
/// reads as padded with zeros on the right, so a clear bit is found just
/// past the end when the range runs to the end unbounded, but not when
/// the caller gave `end`: then -1, as for a bit not found. A missing key
/// is the caller's case (0 for a clear bit, -1 for a set one).
pub fn pos(s: &[u8], bit: u8, start: Option<i64>, end: Option<i64>, bits: bool) -> i64 {
    let unit = if bits { 8 } else { 1 };
    let len = s.len() as i64 * unit;
    let (lo, hi) = match start {
        None => (0, len - 1),
        Some(st) => match clamp(len, st, end.unwrap_or(len - 1)) {
            Some(r) => r,
            None => return -1,
        },
    };
    if len == 0 {
        return -1;
    }
    // The range in bits.
    let (blo, bhi) = if bits { (lo, hi) } else { (lo * 8, hi * 8 + 7) };
    let mut i = blo;
    while i <= bhi {
        // Whole bytes at a time where aligned.
        if i & 7 == 0 && i + 7 <= bhi {
            let b = s[(i >> 3) as usize];
            let skip = if bit == 1 { 0x00 } else { 0xff };
            if b == skip {
                i += 8;
                continue;
            }
        }
        if get_bit(s, i as u64) == bit {
            return i;
        }
        i += 1;
    }
    if bit == 0 && end.is_none() {
        // Past the range: the zero padding. Redis rounds to the next byte.
        return (bhi + 8) & !7;
    }
    -1
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The string as a vector of bits, most significant first.
    fn to_bits(s: &[u8]) -> Vec<u8> {
        s.iter()
            .flat_map(|b| (0..8).map(move |i| (b >> (7 - i)) & 1))
            .collect()
    }

    fn model_clamp(len: i64, start: i64, end: i64) -> Vec<i64> {
        let s = if start < 0 { len + start } else { start }.max(0);
        let e = if end < 0 { len + end } else { end }.max(0).min(len - 1);
        (s..=e).collect()
    }

    fn model_count(s: &[u8], range: Option<(i64, i64)>, bits: bool) -> u64 {
        let b = to_bits(s);
        match range {
            None => b.iter().map(|&x| u64::from(x)).sum(),
            Some((st, en)) if st < 0 && en < 0 && st > en => 0,
            Some((st, en)) => {
                let unit = if bits { 1 } else { 8 };
                let n = b.len() as i64 / unit;
                model_clamp(n, st, en)
                    .into_iter()
                    .flat_map(|u| (u * unit..(u + 1) * unit).map(|i| u64::from(b[i as usize])))
                    .sum()
            }
        }
    }

    fn model_pos(s: &[u8], bit: u8, start: Option<i64>, end: Option<i64>, bits: bool) -> i64 {
        let b = to_bits(s);
        let unit = if bits { 1 } else { 8 };
        let n = b.len() as i64 / unit;
        let units = match start {
            None => (0..n).collect(),
            Some(st) => model_clamp(n, st, end.unwrap_or(n - 1)),
        };
        if units.is_empty() {
            return -1;
        }
        for &u in &units {
            for i in u * unit..(u + 1) * unit {
                if b[i as usize] == bit {
                    return i;
                }
            }
        }
        if bit == 0 && end.is_none() {
            let last = *units.last().unwrap_or(&0);
            return ((last + 1) * unit + 7) / 8 * 8;
        }
        -1
    }

    #[test]
    fn set_and_get_bits_like_a_bit_vector() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut s = Vec::new();
        let mut model: Vec<u8> = Vec::new();
        for _ in 0..2000 {
            let off = rng.gen_range(0..200u64);
            let on = rng.gen_bool(0.5);
            if model.len() <= off as usize {
                model.resize(((off as usize >> 3) + 1) * 8, 0);
            }
            let old = model[off as usize];
            model[off as usize] = u8::from(on);
            assert_eq!(set_bit(&mut s, off, on), old);
            assert_eq!(to_bits(&s), model);
            let probe = rng.gen_range(0..260u64);
            assert_eq!(
                get_bit(&s, probe),
                model.get(probe as usize).copied().unwrap_or(0)
            );
        }
    }

    #[test]
    fn count_and_pos_match_the_model() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..6);
            let s: Vec<u8> = (0..len)
                .map(|_| match rng.gen_range(0..4) {
                    0 => 0,
                    1 => 0xff,
                    _ => rng.gen(),
                })
                .collect();
            let bits = rng.gen_bool(0.5);
            let span = if bits { 50 } else { 8 };
            let st = rng.gen_range(-span..span);
            let en = rng.gen_range(-span..span);
            let range = rng.gen_bool(0.8).then_some((st, en));
            assert_eq!(
                count(&s, range, bits),
                model_count(&s, range, bits),
                "{s:?} {range:?} bits {bits}"
            );
            let bit = rng.gen_range(0..2);
            let start = rng.gen_bool(0.7).then_some(st);
            let end = start.and(rng.gen_bool(0.5).then_some(en));
            if !s.is_empty() {
                assert_eq!(
                    pos(&s, bit, start, end, bits),
                    model_pos(&s, bit, start, end, bits),
                    "{s:?} bit {bit} {start:?} {end:?} bits {bits}"
                );
            }
        }
    }
}
