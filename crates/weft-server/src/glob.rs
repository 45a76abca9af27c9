//! Redis glob patterns (`KEYS`, `SCAN MATCH`, `HSCAN MATCH`): `*`, `?`,
//! `[abc]`, `[^a-z]`, `\x`. Matching is iterative (one backtrack point for
//! the last `*`), so no pattern can blow the stack or take exponential time.

/// True when `s` matches `pattern`.
pub fn matches(pattern: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                _ if i < s.len() => {
                    if let Some(np) = match_one(pattern, p, s[i]) {
                        p = np;
                        i += 1;
                        continue;
                    }
                }
                _ => {}
            }
        } else if i == s.len() {
            return true;
        }
        // Mismatch: let the last star swallow one more byte.
        match star {
            Some((sp, si)) if si < s.len() => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// Matches one pattern element at `p` against `c`; returns the position
/// after the element on a match.
fn match_one(pat: &[u8], p: usize, c: u8) -> Option<usize> {
    match pat[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pat.len() => (pat[p + 1] == c).then_some(p + 2),
        b'[' => {
            let mut q = p + 1;
            let negate = q < pat.len() && pat[q] == b'^';
            if negate {
                q += 1;
            }
            let mut hit = false;
            loop {
                if q >= pat.len() {
                    // Unterminated class: Redis treats the end as closing it.
                    break;
                }
                if pat[q] == b']' {
                    q += 1;
                    break;
                }
                if pat[q] == b'\\' && q + 1 < pat.len() {
                    hit |= pat[q + 1] == c;
                    q += 2;
                } else if q + 2 < pat.len() && pat[q + 1] == b'-' {
                    let (mut a, mut b) = (pat[q], pat[q + 2]);
                    if a > b {
                        std::mem::swap(&mut a, &mut b);
                    }
                    hit |= a <= c && c <= b;
                    q += 3;
                } else {
                    hit |= pat[q] == c;
                    q += 1;
                }
            }
            (hit != negate).then_some(q)
        }
        x => (x == c).then_some(p + 1),
    }
}

/// The literal prefix every match of `pattern` starts with (lets `KEYS` and
/// `SCAN` seek instead of reading the whole key space).
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'*' | b'?' | b'[' => break,
            b'\\' if i + 1 < pattern.len() => {
                out.push(pattern[i + 1]);
                i += 2;
            }
            b'\\' => break,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_examples() {
        let m = |p: &str, s: &str| matches(p.as_bytes(), s.as_bytes());
        assert!(m("*", ""));
        assert!(m("h?llo", "hello") && m("h?llo", "hallo") && !m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo") && m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hello") && !m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo") && !m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo") && !m("h[a-b]llo", "hcllo"));
        assert!(m("h\\*llo", "h*llo") && !m("h\\*llo", "hello"));
        assert!(m("user:*:name", "user:42:name") && !m("user:*:name", "user:42:age"));
        assert!(m("*a*b*c", "xxaxxbxxc") && !m("*a*b*c", "xxaxxbxx"));
        assert!(!m("abc", "abcd") && !m("abcd", "abc"));
        assert!(!m("[", "x") && !m("a[", "a"));
    }

    #[test]
    fn pathological_pattern_is_fast() {
        let p = "*a".repeat(50) + "b";
        let s = "a".repeat(10_000);
        let t = std::time::Instant::now();
        assert!(!matches(p.as_bytes(), s.as_bytes()));
        assert!(t.elapsed().as_secs() < 5);
    }

    #[test]
    fn prefixes() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"a\\*b?"), b"a*b");
        assert_eq!(literal_prefix(b"*"), b"");
    }
}
