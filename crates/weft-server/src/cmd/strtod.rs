//! C's `strtod` and `strtold` (glibc, x86-64) as Redis 7.0 calls them, so
//! that a number Redis accepts is accepted here and rounds to the same
//! value: decimal and hexadecimal (`0x1p3`) forms, `inf`/`infinity`,
//! `nan(...)`, and `ERANGE` for values too large (or non-zero values too
//! small) for the format. Redis reads scores, weights and score-range
//! bounds with `strtod` into a `double` and `INCRBYFLOAT`'s operands and
//! blocking timeouts with `strtold` into an x87 `long double`
//! (`long_double.rs`); both are correctly rounded to nearest, ties to
//! even, which is what [`round`] does with exact big-integer arithmetic.

use std::cmp::Ordering;

use num_bigint::BigUint;

/// A binary floating-point format: significand bits (the leading one
/// included) and the exponents of its smallest and largest normal powers
/// of two.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Format {
    precision: u32,
    emin: i64,
    emax: i64,
}

/// IEEE 754 binary64, C's `double`.
pub(crate) const DOUBLE: Format = Format {
    precision: 53,
    emin: -1022,
    emax: 1023,
};

/// The x87 80-bit extended format, C's `long double` on x86-64.
pub(crate) const EXTENDED: Format = Format {
    precision: 64,
    emin: -16382,
    emax: 16383,
};

/// A number rounded to a format: `±mant · 2^exp` (`mant` below
/// `2^precision`, 0 for zero), an infinity or NaN. `range_error` is C's
/// `errno == ERANGE`: the exact value overflowed the format or was a
/// non-zero value that rounded to zero.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    Finite { neg: bool, mant: u64, exp: i64 },
    Inf { neg: bool },
    Nan,
}

/// What C's `strto*` made of a whole string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Parsed {
    pub value: Value,
    pub range_error: bool,
}

/// C's `isspace` in the C locale.
pub(crate) fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Hex digits of a hexadecimal literal kept exactly; the ones after them
/// only decide rounding (a sticky digit stands for them), so a long
/// literal costs no more than a short one.
const HEX_DIGITS_KEPT: usize = 40;

/// Parses all of `s` as `strtod`/`strtold` would (no leading space: the
/// callers decide about those), rounded to `fmt`. `None` where C would
/// stop before the end of `s` (or convert nothing).
pub(crate) fn parse(s: &[u8], fmt: Format) -> Option<Parsed> {
    let (neg, body) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = |t: &[u8], w: &str| t.eq_ignore_ascii_case(w.as_bytes());
    if lower(body, "inf") || lower(body, "infinity") {
        return Some(exact(Value::Inf { neg }));
    }
    if body.len() >= 3 && lower(&body[..3], "nan") {
        let rest = &body[3..];
        let in_parens = rest.len() >= 2
            && rest[0] == b'('
            && rest[rest.len() - 1] == b')'
            && rest[1..rest.len() - 1]
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'_');
        return (rest.is_empty() || in_parens).then_some(exact(Value::Nan));
    }
    if body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
        if let Some(p) = parse_hex(&body[2..], neg, fmt) {
            return Some(p);
        }
        // "0x" without hex digits: C converts the "0" and stops at the x.
        return None;
    }
    parse_decimal(body, neg, fmt)
}

fn exact(value: Value) -> Parsed {
    Parsed {
        value,
        range_error: false,
    }
}

/// `digits [. digits]` (at least one digit in all) then an optional
/// exponent `e[±]digits`, all of `s`. Returns the digits (without the
/// dot), the number of them after the dot and the exponent.
fn split_number(s: &[u8], hex: bool, exp_char: u8) -> Option<(Vec<u8>, i64, i64)> {
    let is_digit = |c: u8| {
        if hex {
            c.is_ascii_hexdigit()
        } else {
            c.is_ascii_digit()
        }
    };
    let mut i = 0;
    let mut digits = Vec::new();
    while i < s.len() && is_digit(s[i]) {
        digits.push(s[i]);
        i += 1;
    }
    let mut after_dot = 0i64;
    if i < s.len() && s[i] == b'.' {
        i += 1;
        while i < s.len() && is_digit(s[i]) {
            digits.push(s[i]);
            after_dot += 1;
            i += 1;
        }
    }
    if digits.is_empty() {
        return None;
    }
    let mut exp = 0i64;
    if i < s.len() && (s[i] | 0x20) == exp_char {
        let mut j = i + 1;
        let eneg = match s.get(j) {
            Some(b'-') => {
                j += 1;
                true
            }
            Some(b'+') => {
                j += 1;
                false
            }
            _ => false,
        };
        let start = j;
        while j < s.len() && s[j].is_ascii_digit() {
            // Saturates far beyond any format's range.
            exp = (exp * 10 + i64::from(s[j] - b'0')).min(1 << 40);
            j += 1;
        }
        if j == start {
            return None; // "1e" or "1e+": C stops before the e
        }
        if eneg {
            exp = -exp;
        }
        i = j;
    }
    (i == s.len()).then_some((digits, after_dot, exp))
}

fn parse_decimal(s: &[u8], neg: bool, fmt: Format) -> Option<Parsed> {
    let (digits, after_dot, exp) = split_number(s, false, b'e')?;
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Some(exact(Value::Finite {
            neg,
            mant: 0,
            exp: 0,
        }));
    };
    let last = digits.iter().rposition(|&d| d != b'0').unwrap_or(first);
    let significant = &digits[first..=last];
    // value = significant · 10^exp10
    let exp10 = exp - after_dot + (digits.len() - 1 - last) as i64;
    let n = significant.len() as i64;
    // 10^(n-1+exp10) <= value < 10^(n+exp10). Beyond these loose bounds
    // the value surely overflows or rounds to zero; between them the
    // exact path decides.
    let log10_max = ((fmt.emax + 1) as f64 * std::f64::consts::LOG10_2) as i64 + 1;
    let log10_min =
        ((fmt.emin - i64::from(fmt.precision)) as f64 * std::f64::consts::LOG10_2) as i64 - 2;
    if n - 1 + exp10 > log10_max {
        return Some(overflow(neg));
    }
    if n + exp10 < log10_min {
        return Some(underflow(neg));
    }
    let d = BigUint::parse_bytes(significant, 10)?;
    let ten = BigUint::from(10u32);
    let (num, den) = if exp10 >= 0 {
        (d * ten.pow(exp10 as u32), BigUint::from(1u32))
    } else {
        (d, ten.pow((-exp10) as u32))
    };
    Some(rounded(neg, round(&num, &den, fmt)))
}

fn parse_hex(s: &[u8], neg: bool, fmt: Format) -> Option<Parsed> {
    let (digits, after_dot, exp) = split_number(s, true, b'p')?;
    let Some(first) = digits.iter().position(|&d| d != b'0') else {
        return Some(exact(Value::Finite {
            neg,
            mant: 0,
            exp: 0,
        }));
    };
    let mut exp2 = exp - 4 * after_dot + 4 * (digits.len() - first) as i64;
    let mut kept: Vec<u8> = digits[first..]
        .iter()
        .copied()
        .take(HEX_DIGITS_KEPT)
        .collect();
    if digits[first + kept.len()..].iter().any(|&d| d != b'0') {
        kept.push(b'1');
    }
    exp2 -= 4 * kept.len() as i64;
    // value = kept · 2^exp2, 2^(4·len - 4) <= kept < 2^(4·len)
    let top = 4 * kept.len() as i64 + exp2;
    if top - 4 > fmt.emax + 1 {
        return Some(overflow(neg));
    }
    if top < fmt.emin - i64::from(fmt.precision) - 1 {
        return Some(underflow(neg));
    }
    let m = BigUint::parse_bytes(&kept, 16)?;
    let one = BigUint::from(1u32);
    let (num, den) = if exp2 >= 0 {
        (m << exp2 as u64, one)
    } else {
        (m, one << (-exp2) as u64)
    };
    Some(rounded(neg, round(&num, &den, fmt)))
}

fn overflow(neg: bool) -> Parsed {
    Parsed {
        value: Value::Inf { neg },
        range_error: true,
    }
}

fn underflow(neg: bool) -> Parsed {
    Parsed {
        value: Value::Finite {
            neg,
            mant: 0,
            exp: 0,
        },
        range_error: true,
    }
}

/// The result of rounding a positive exact value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Rounded {
    /// `mant · 2^exp`, `mant > 0`.
    Finite { mant: u64, exp: i64 },
    /// At or above the format's largest power of two plus one.
    Overflow,
    /// Non-zero, but nearer to zero than to the smallest subnormal.
    Underflow,
}

fn rounded(neg: bool, r: Rounded) -> Parsed {
    match r {
        Rounded::Finite { mant, exp } => exact(Value::Finite { neg, mant, exp }),
        Rounded::Overflow => overflow(neg),
        Rounded::Underflow => underflow(neg),
    }
}

/// `num / den` (both positive) rounded to `fmt`, to nearest, ties to
/// even, subnormals included.
pub(crate) fn round(num: &BigUint, den: &BigUint, fmt: Format) -> Rounded {
    let shifted_cmp = |e: i64| {
        if e >= 0 {
            num.cmp(&(den << e as u64))
        } else {
            (num << (-e) as u64).cmp(den)
        }
    };
    // floor(log2(num / den)) is e or e - 1.
    let mut e = num.bits() as i64 - den.bits() as i64;
    if shifted_cmp(e) == Ordering::Less {
        e -= 1;
    }
    let p = i64::from(fmt.precision);
    let mut lsb = (e - (p - 1)).max(fmt.emin - (p - 1));
    let (n, d) = if lsb >= 0 {
        (num.clone(), den << lsb as u64)
    } else {
        (num << (-lsb) as u64, den.clone())
    };
    let mut q = &n / &d;
    let twice_r: BigUint = (&n - &q * &d) << 1u32;
    if twice_r > d || (twice_r == d && q.bit(0)) {
        q += 1u32;
    }
    if q.bits() > u64::from(fmt.precision) {
        q >>= 1u32;
        lsb += 1;
    }
    let Some(mant) = q.iter_u64_digits().next() else {
        return Rounded::Underflow;
    };
    if lsb + q.bits() as i64 - 1 > fmt.emax {
        return Rounded::Overflow;
    }
    Rounded::Finite { mant, exp: lsb }
}

/// A `double` from a value rounded to [`DOUBLE`].
fn to_f64(v: Value) -> f64 {
    match v {
        Value::Nan => f64::NAN,
        Value::Inf { neg } => {
            if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        Value::Finite { neg, mant, exp } => {
            let bits = if mant >= 1 << 52 {
                // Normal: the exponent field is biased by 1023 + 52.
                ((exp + 1075) as u64) << 52 | (mant & ((1 << 52) - 1))
            } else {
                mant // subnormal: exp is -1074
            };
            let sign = if neg { 1u64 << 63 } else { 0 };
            f64::from_bits(sign | bits)
        }
    }
}

/// Redis's `string2d`: all of `s` is a `strtod` number, without leading
/// space, not NaN, neither overflowing nor a non-zero value rounding to
/// zero. Decimals take Rust's parser (correctly rounded, as glibc's);
/// only hexadecimal forms take the exact path.
pub(crate) fn string2d(s: &[u8]) -> Option<f64> {
    if s.first().is_none_or(|&c| is_c_space(c)) {
        return None;
    }
    if s.iter().any(|&c| c | 0x20 == b'x') {
        let p = parse(s, DOUBLE)?;
        let v = to_f64(p.value);
        return (!p.range_error && !v.is_nan()).then_some(v);
    }
    let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    let letters = s
        .iter()
        .any(|c| c.is_ascii_alphabetic() && c | 0x20 != b'e');
    if v.is_infinite() && !letters {
        return None; // overflow: ERANGE with HUGE_VAL
    }
    if v == 0.0 && has_nonzero_mantissa(s) {
        return None; // underflow: ERANGE with zero
    }
    Some(v)
}

/// A bound of a score range as Redis 7.0's `zslParseRange` reads it (after
/// its `(`): `strtod` up to the first NUL, leading spaces allowed, the
/// empty string 0, overflow and underflow kept (±inf, 0), NaN refused.
pub(crate) fn range_bound(s: &[u8]) -> Option<f64> {
    let s = s.split(|&c| c == 0).next().unwrap_or(b"");
    if s.is_empty() {
        return Some(0.0); // strtod converts nothing and stops at the NUL
    }
    let start = s.iter().position(|&c| !is_c_space(c))?;
    let p = parse(&s[start..], DOUBLE)?;
    let v = to_f64(p.value);
    (!v.is_nan()).then_some(v)
}

/// True if the mantissa of a decimal literal (before its exponent) has a
/// non-zero digit.
fn has_nonzero_mantissa(s: &[u8]) -> bool {
    s.iter()
        .take_while(|&&c| c | 0x20 != b'e')
        .any(|c| (b'1'..=b'9').contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2d_accepts_what_redis_accepts() {
        assert_eq!(string2d(b"1.5"), Some(1.5));
        assert_eq!(string2d(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(string2d(b"+Infinity"), Some(f64::INFINITY));
        assert_eq!(string2d(b"0x10"), Some(16.0));
        assert_eq!(string2d(b"-0X1p-2"), Some(-0.25));
        assert_eq!(string2d(b"0x.8"), Some(0.5));
        assert_eq!(string2d(b"0x1.8p1"), Some(3.0));
        assert_eq!(string2d(b"1e3"), Some(1000.0));
        assert_eq!(string2d(b".5"), Some(0.5));
        assert_eq!(string2d(b"5."), Some(5.0));
        assert_eq!(string2d(b"0e999999"), Some(0.0));
        assert_eq!(string2d(b"1e-310"), Some(1e-310)); // subnormal: kept
        for bad in [
            &b""[..],
            b" 1",
            b"1 ",
            b"nan",
            b"-nan(12)",
            b"1e400",
            b"-1e400",
            b"1e-400",
            b"0x",
            b"0x1p",
            b"1e",
            b"abc",
            b"0x1p99999",
            b"1\0",
        ] {
            assert_eq!(string2d(bad), None, "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn hexadecimal_literals_round_to_nearest_even() {
        // 2^53 + 1 is a tie between 2^53 and 2^53 + 2: even is 2^53.
        assert_eq!(string2d(b"0x20000000000001"), Some(9007199254740992.0));
        assert_eq!(string2d(b"0x20000000000003"), Some(9007199254740996.0));
        // A digit past the kept ones breaks the tie upwards.
        let long = format!("0x20000000000001{}1", "0".repeat(60));
        let want = 9007199254740994.0 * 16f64.powi(61);
        assert_eq!(string2d(long.as_bytes()), Some(want));
        assert_eq!(string2d(b"0x1p-1074"), Some(f64::from_bits(1)));
        assert_eq!(string2d(b"0x1p-1076"), None); // rounds to zero
        assert_eq!(string2d(b"0x1.fffffffffffffp1023"), Some(f64::MAX));
        assert_eq!(string2d(b"0x1.fffffffffffff7p1023"), Some(f64::MAX));
        assert_eq!(string2d(b"0x1.fffffffffffff8p1023"), None); // rounds to 2^1024
        assert_eq!(string2d(b"0x0.0000000000000001p68"), Some(16.0));
    }

    #[test]
    fn range_bounds_parse_as_zsl_parse_range() {
        assert_eq!(range_bound(b""), Some(0.0));
        assert_eq!(range_bound(b" 1"), Some(1.0));
        assert_eq!(range_bound(b"\t0x10"), Some(16.0));
        assert_eq!(range_bound(b"1e400"), Some(f64::INFINITY));
        assert_eq!(range_bound(b"1e-400"), Some(0.0));
        assert_eq!(range_bound(b"2\0junk"), Some(2.0));
        assert_eq!(range_bound(b" "), None);
        assert_eq!(range_bound(b"1 "), None);
        assert_eq!(range_bound(b"nan"), None);
    }

    /// glibc's own `strtod` on `s` as Redis's `string2d` and
    /// `zslParseRange` call it: (`string2d`'s answer, the range bound's).
    fn glibc(s: &[u8]) -> (Option<f64>, Option<f64>) {
        let c = std::ffi::CString::new(s).unwrap_or_default();
        let mut end: *mut libc::c_char = std::ptr::null_mut();
        // SAFETY: `c` is a NUL-terminated string that outlives the call;
        // `end` is a valid out-pointer; errno is this thread's.
        let (v, consumed, erange) = unsafe {
            *libc::__errno_location() = 0;
            let v = libc::strtod(c.as_ptr(), &mut end);
            let consumed = end.offset_from(c.as_ptr()) as usize;
            (v, consumed, *libc::__errno_location() == libc::ERANGE)
        };
        let whole = consumed == s.len() && !s.contains(&0);
        let d = (!s.is_empty()
            && !is_c_space(s[0])
            && whole
            && !(erange && (v.is_infinite() || v == 0.0))
            && !v.is_nan())
        .then_some(v);
        // zslParseRange: whatever strtod stops at must be the NUL.
        let r = (consumed == c.as_bytes().len() && !v.is_nan()).then_some(v);
        (d, r)
    }

    /// Random number-like strings (digits, dots, signs, exponents,
    /// hexadecimal forms, words, spaces), parsed here and by glibc.
    #[test]
    fn parses_as_glibc_strtod_does() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x57d0d);
        const PIECES: &[&str] = &[
            "0",
            "1",
            "5",
            "9",
            "00",
            "123456789",
            "99999999999999999999",
            ".",
            ".",
            "e",
            "E",
            "e-",
            "e+",
            "e308",
            "e-308",
            "e-324",
            "e400",
            "-",
            "+",
            "0x",
            "0X",
            "a",
            "f",
            "F",
            "p",
            "p-",
            "p+",
            "p1023",
            "p-1074",
            "p-1080",
            "inf",
            "INF",
            "infinity",
            "nan",
            "nan(1)",
            " ",
            "\t",
            "x",
            "7",
            "3",
            "4503599627370497",
            "1fffffffffffff",
            "2.5",
            "e22",
            "e-5",
            "0000",
        ];
        let mut checked = 0;
        for _ in 0..200_000 {
            let n = rng.gen_range(1..6);
            let s: String = (0..n)
                .map(|_| PIECES[rng.gen_range(0..PIECES.len())])
                .collect();
            let (d, r) = glibc(s.as_bytes());
            let bits = |v: Option<f64>| v.map(f64::to_bits);
            assert_eq!(bits(string2d(s.as_bytes())), bits(d), "string2d({s:?})");
            assert_eq!(
                bits(range_bound(s.as_bytes())),
                bits(r),
                "range_bound({s:?})"
            );
            checked += usize::from(d.is_some());
        }
        assert!(checked > 10_000, "too few valid numbers drawn: {checked}");
    }

    #[test]
    fn extended_parses_keep_64_bits() {
        let p = parse(b"0.1", EXTENDED).unwrap();
        // 0.1 = 0xCCCCCCCCCCCCCCCD · 2^-67 in 64 bits.
        assert_eq!(
            p.value,
            Value::Finite {
                neg: false,
                mant: 0xCCCC_CCCC_CCCC_CCCD,
                exp: -67
            }
        );
        // The largest long double is about 1.19e4932.
        assert!(parse(b"1.2e4932", EXTENDED).unwrap().range_error);
        assert!(!parse(b"1.1e4932", EXTENDED).unwrap().range_error);
        assert!(!parse(b"1e-4940", EXTENDED).unwrap().range_error);
        assert!(parse(b"1e-4960", EXTENDED).unwrap().range_error);
    }
}
