//! The x87 80-bit `long double` arithmetic Redis does on x86-64, emulated
//! exactly: `INCRBYFLOAT` and `HINCRBYFLOAT` read both operands with
//! `strtold`, add them in 64-bit precision and print the sum with
//! `%.17Lf` less its trailing zeros (`ld2string`'s human mode), and
//! blocking timeouts are `(long long) ceill(seconds * 1000.0)`. Doing the
//! same rounding steps here gives Redis's replies digit for digit
//! (`1000.1` + 0 is `1000.09999999999999998` in both).

use num_bigint::BigUint;

use super::strtod::{self, Rounded, Value, EXTENDED};

/// Redis's `MAX_LONG_DOUBLE_CHARS`: `string2ld` refuses longer strings.
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

/// A `long double` that is not NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LongDouble {
    /// `±mant · 2^exp` (`mant` 0 for zero).
    Finite {
        neg: bool,
        mant: u64,
        exp: i64,
    },
    Inf {
        neg: bool,
    },
}

impl LongDouble {
    /// Redis's `string2ld`: all of `s` (at most 5119 bytes) is a `strtold`
    /// number without leading space, not NaN, neither overflowing nor a
    /// non-zero value rounding to zero.
    pub(crate) fn parse(s: &[u8]) -> Option<LongDouble> {
        if s.is_empty() || s.len() >= MAX_LONG_DOUBLE_CHARS || strtod::is_c_space(s[0]) {
            return None;
        }
        let p = strtod::parse(s, EXTENDED)?;
        if p.range_error {
            return None;
        }
        match p.value {
            Value::Finite { neg, mant, exp } => Some(LongDouble::Finite { neg, mant, exp }),
            Value::Inf { neg } => Some(LongDouble::Inf { neg }),
            Value::Nan => None,
        }
    }

    pub(crate) fn is_finite(self) -> bool {
        matches!(self, LongDouble::Finite { .. })
    }

    /// `self + other` rounded to 64 bits; `None` for NaN (`inf - inf`).
    pub(crate) fn add(self, other: LongDouble) -> Option<LongDouble> {
        use LongDouble::{Finite, Inf};
        let (a, b) = match (self, other) {
            (Inf { neg: x }, Inf { neg: y }) => return (x == y).then_some(self),
            (Inf { .. }, _) => return Some(self),
            (_, Inf { .. }) => return Some(other),
            (
                Finite {
                    mant: 0, neg: x, ..
                },
                Finite {
                    mant: 0, neg: y, ..
                },
            ) => {
                // Only -0 + -0 keeps the sign.
                return Some(Finite {
                    neg: x && y,
                    mant: 0,
                    exp: 0,
                });
            }
            (Finite { mant: 0, .. }, _) => return Some(other),
            (_, Finite { mant: 0, .. }) => return Some(self),
            (
                Finite {
                    neg: an,
                    mant: am,
                    exp: ae,
                },
                Finite {
                    neg: bn,
                    mant: bm,
                    exp: be,
                },
            ) => ((an, am, ae), (bn, bm, be)),
        };
        // The exact sum, as a multiple of the smaller unit.
        let e = a.2.min(b.2);
        let x = BigUint::from(a.1) << (a.2 - e) as u64;
        let y = BigUint::from(b.1) << (b.2 - e) as u64;
        let (neg, mag) = if a.0 == b.0 {
            (a.0, x + y)
        } else if x >= y {
            (a.0, x - y)
        } else {
            (b.0, y - x)
        };
        if mag.bits() == 0 {
            return Some(Finite {
                neg: false,
                mant: 0,
                exp: 0,
            });
        }
        Some(scaled(neg, mag, e))
    }

    /// `(long long) ceill(self * 1000.0)` as x86-64 computes it: an
    /// infinite or out-of-range result converts to `LLONG_MIN`.
    pub(crate) fn ceil_millis(self) -> i64 {
        let LongDouble::Finite { neg, mant, exp } = self else {
            return i64::MIN;
        };
        if mant == 0 {
            return 0;
        }
        let LongDouble::Finite { mant, exp, .. } = scaled(neg, BigUint::from(mant) * 1000u32, exp)
        else {
            return i64::MIN;
        };
        // |value| = mant · 2^exp; ceil towards +inf.
        let magnitude: u128 = if exp >= 0 {
            if exp > 63 {
                return i64::MIN;
            }
            u128::from(mant) << exp
        } else {
            let shift = (-exp).min(127) as u32;
            let whole = u128::from(mant) >> shift;
            let frac = u128::from(mant) & ((1u128 << shift) - 1);
            if !neg && frac != 0 {
                whole + 1
            } else {
                whole
            }
        };
        if neg {
            if magnitude > 1u128 << 63 {
                i64::MIN
            } else {
                (magnitude as i64).wrapping_neg()
            }
        } else if magnitude >= 1u128 << 63 {
            i64::MIN
        } else {
            magnitude as i64
        }
    }

    /// `ld2string(.., LD_STR_HUMAN)`: `%.17Lf` (rounded to nearest, ties
    /// to even, as glibc's printf), trailing zeros and a trailing dot
    /// removed, `-0` as `0`; infinities as `inf`/`-inf`.
    pub(crate) fn human(self) -> String {
        let (neg, mant, exp) = match self {
            LongDouble::Inf { neg } => return if neg { "-inf" } else { "inf" }.into(),
            LongDouble::Finite { neg, mant, exp } => (neg, mant, exp),
        };
        const SCALE: u128 = 100_000_000_000_000_000; // 10^17
        let mut s = if neg {
            String::from("-")
        } else {
            String::new()
        };
        if exp >= 0 {
            // An integer: %.17Lf prints ".00000000000000000", all trimmed.
            s.push_str(&(BigUint::from(mant) << exp as u64).to_string());
        } else {
            // mant · 10^17 < 2^121: the digits are round(mant·10^17 / 2^-exp).
            let scaled = u128::from(mant) * SCALE;
            let shift = -exp;
            let digits = if shift >= 122 {
                0 // below 2^-1: rounds to 0
            } else {
                let shift = shift as u32;
                let q = scaled >> shift;
                let r = scaled & ((1u128 << shift) - 1);
                let half = 1u128 << (shift - 1);
                if r > half || (r == half && q & 1 == 1) {
                    q + 1
                } else {
                    q
                }
            };
            let frac = format!("{:017}", digits % SCALE);
            s.push_str(&(digits / SCALE).to_string());
            let frac = frac.trim_end_matches('0');
            if !frac.is_empty() {
                s.push('.');
                s.push_str(frac);
            }
        }
        if s == "-0" {
            s = "0".into();
        }
        s
    }
}

/// `±mag · 2^e` rounded to 64 bits (an infinity past the largest).
fn scaled(neg: bool, mag: BigUint, e: i64) -> LongDouble {
    let one = BigUint::from(1u32);
    let (num, den) = if e >= 0 {
        (mag << e as u64, one)
    } else {
        (mag, one << (-e) as u64)
    };
    match strtod::round(&num, &den, EXTENDED) {
        Rounded::Finite { mant, exp } => LongDouble::Finite { neg, mant, exp },
        Rounded::Overflow => LongDouble::Inf { neg },
        Rounded::Underflow => LongDouble::Finite {
            neg,
            mant: 0,
            exp: 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(a: &str, b: &str) -> String {
        let x = LongDouble::parse(a.as_bytes()).unwrap();
        let y = LongDouble::parse(b.as_bytes()).unwrap();
        x.add(y).unwrap().human()
    }

    /// Replies of redis-server 7.0.15 on x86-64 to `SET f a`,
    /// `INCRBYFLOAT f b`.
    #[test]
    fn sums_print_as_redis_prints_them() {
        assert_eq!(sum("10.5", "0.1"), "10.6");
        assert_eq!(sum("0.1", "0.2"), "0.3");
        assert_eq!(sum("1000.1", "0"), "1000.09999999999999998");
        assert_eq!(sum("1102.71", "12345.6789"), "13448.38889999999999958");
        assert_eq!(sum("0.3", "5.0e+3"), "5000.29999999999999982");
        assert_eq!(sum("5000.3", "1e20"), "100000000000000005000");
        assert_eq!(sum("1e30", "1"), "1000000000000000000024696061952");
        assert_eq!(sum("3", "0x1p-3"), "3.125");
        assert_eq!(
            sum("123456789.123456789", "0"),
            "123456789.12345678899873747"
        );
        assert_eq!(sum("-5", "5"), "0");
        assert_eq!(sum("-1e-30", "0"), "0");
        assert_eq!(sum("1.5", "0x10"), "17.5");
        assert_eq!(sum("0", "0.000003814697265625"), "0.00000381469726562");
        assert_eq!(sum("-0", "-0"), "0");
        assert_eq!(sum("0.1", "-0.1"), "0");
        assert_eq!(
            sum("1.7976931348623157e308", "1e308"),
            "27976931348623157000235224044135007878929992917961993400398769561769337091\
             8830364684014944221042050987341155710361544171686148029276505307138777262321\
             8771298880360650022042390338125505985091741327394804985696200435827605411893\
             65866551522561741435317031294527744011878159793174665688773926186886103199182225408"
        );
    }

    #[test]
    fn ties_in_the_17th_decimal_round_to_even() {
        // 2^-18 = 0.000003814697265625: 18 decimals, the last a tie.
        assert_eq!(sum("0", "0x1p-18"), "0.00000381469726562");
        // 3 · 2^-18 = 0.000011444091796875: ...7|5 rounds up to 8.
        assert_eq!(sum("0", "0x3p-18"), "0.00001144409179688");
    }

    #[test]
    fn parse_refuses_what_string2ld_refuses() {
        for bad in ["", " 1", "1 ", "nan", "1e4933", "1e-5000", "abc", "0x"] {
            assert_eq!(LongDouble::parse(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(
            LongDouble::parse(b"-inf"),
            Some(LongDouble::Inf { neg: true })
        );
        assert!(LongDouble::parse(&vec![b'1'; 5119]).is_none());
        assert!(LongDouble::parse(&vec![b'1'; 4932]).is_some()); // 1.1e4931
        assert!(LongDouble::parse(&vec![b'2'; 4933]).is_none()); // 2.2e4932 overflows
        let inf = LongDouble::parse(b"inf").unwrap();
        assert_eq!(inf.add(LongDouble::parse(b"-inf").unwrap()), None);
    }

    #[test]
    fn timeouts_round_up_to_milliseconds() {
        let ms = |s: &str| LongDouble::parse(s.as_bytes()).unwrap().ceil_millis();
        assert_eq!(ms("0"), 0);
        assert_eq!(ms("-0"), 0);
        assert_eq!(ms("0.0015"), 2);
        assert_eq!(ms("1.5"), 1500);
        assert_eq!(ms("1e-4000"), 1);
        assert_eq!(ms("-1e-4000"), 0);
        assert_eq!(ms("-1"), -1000);
        assert_eq!(ms("0x1p-3"), 125);
        assert_eq!(ms("1e30"), i64::MIN);
        assert_eq!(ms("inf"), i64::MIN);
        assert_eq!(ms("9223372036854775"), 9223372036854775000);
        assert_eq!(ms("1e16"), i64::MIN);
        assert_eq!(ms("-1e16"), i64::MIN);
    }
}
