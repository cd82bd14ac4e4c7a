//! Glob matching for `PSUBSCRIBE` patterns, bit-for-bit compatible with Redis.
//!
//! A pattern subscriber must receive exactly the channels a real Redis would
//! deliver to it, so this module re-implements the semantics of Redis's
//! `stringmatchlen()` (`src/util.c`, Redis 7.0, case-sensitive mode as used by
//! pub/sub) rather than any "standard" glob:
//!
//! * `*` matches any run of bytes, `?` exactly one byte, `\x` the byte `x`
//!   (a trailing lone `\` is a literal backslash).
//! * `[abc]`, `[^abc]`, `[a-z]`; a reversed range `[z-a]` is swapped, and
//!   range bounds compare as C `char`, i.e. **signed** on x86-64, so
//!   `[a-\xff]` means `[\xff-a]` = bytes `0x00..=0x61` plus `0xff`.
//!   Inside a class `\x` is the literal `x`, and `a-]` is a range ending at
//!   `]` (it does not close the class).
//! * An unterminated `[` class swallows the rest of the pattern: `[abc`
//!   matches one of `a`,`b`,`c`; a trailing `[` never matches; a trailing
//!   `[^` matches any single byte.
//! * The empty text is matched only by the empty pattern (`*` does **not**
//!   match the empty channel: Redis's main loop never runs on an empty
//!   string).
//! * Redis aborts its recursion at nesting depth 1000 (a guard against
//!   abusive patterns): a match that has to expand the 1001st `*` group (a
//!   run of consecutive `*` counts as one group) against a non-empty
//!   remainder of text fails, unless that group ends the pattern.
//!
//! Redis recurses once per `*`. The iterative two-pointer algorithm used
//! here, which only ever backtracks to the most recent `*`, gives identical
//! results (it is exactly the pruning Redis's `skipLongerMatches` flag
//! performs) in `O(pattern.len() * text.len())` worst-case time, with no
//! recursion and no allocation.
//!
//! Every behaviour above was checked differentially against a live
//! `redis-server` 7.0.15 (PSUBSCRIBE + PUBLISH); the cases are recorded in
//! the unit tests below.

/// Redis's `stringmatchlen_impl` returns "no match" once `nesting > 1000`;
/// the `k`-th `*` group is expanded at nesting `k - 1` and recurses at `k`.
const MAX_STAR_GROUPS: usize = 1000;

/// Returns whether `text` (a channel name) matches the Redis glob `pattern`
/// with exactly the semantics of Redis 7.0's case-sensitive
/// `stringmatchlen()`; see the module docs for the corner cases.
///
/// Runs in `O(pattern.len() * text.len())` time, never allocates, never
/// panics on arbitrary bytes.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    if text.is_empty() {
        // Redis's loop is `while (patternLen && stringLen)`: with an empty
        // string it never runs and only an empty pattern matches.
        return pattern.is_empty();
    }
    let (mut p, mut t) = (0usize, 0usize);
    // (pattern index just after the most recent `*` group, text index the
    // group's match currently ends at)
    let mut star: Option<(usize, usize)> = None;
    let mut star_groups = 0usize;

    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            if p == pattern.len() {
                return true; // trailing `*` group: matches whatever is left
            }
            star_groups += 1;
            if star_groups > MAX_STAR_GROUPS {
                return false; // Redis's recursion limit
            }
            star = Some((p, t));
            continue;
        }
        if p < pattern.len() {
            let (matched, next) = match_element(pattern, p, text[t]);
            if matched {
                p = next;
                t += 1;
                continue;
            }
        }
        // Mismatch (or pattern exhausted with text left): let the most
        // recent `*` swallow one more byte, if there is one.
        match star {
            Some((sp, st)) => {
                star = Some((sp, st + 1));
                p = sp;
                t = st + 1;
            }
            None => return false,
        }
    }
    // Text exhausted: only `*`s may remain.
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}

/// Matches the single non-`*` pattern element starting at `pattern[p]`
/// against the byte `c`. Returns whether it matched and the index of the
/// next pattern element. Every such element consumes exactly one text byte.
fn match_element(pattern: &[u8], p: usize, c: u8) -> (bool, usize) {
    match pattern[p] {
        b'?' => (true, p + 1),
        b'[' => match_class(pattern, p, c),
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == c, p + 2),
        lit => (lit == c, p + 1),
    }
}

/// `[...]` starting at `pattern[open] == b'['`, transcribed from Redis's
/// loop (`q` plays the role of Redis's `pattern`, `len - q` of `patternLen`).
fn match_class(pattern: &[u8], open: usize, c: u8) -> (bool, usize) {
    let len = pattern.len();
    let mut q = open + 1;
    let negate = q < len && pattern[q] == b'^';
    if negate {
        q += 1;
    }
    let mut matched = false;
    loop {
        if q < len && pattern[q] == b'\\' && len - q >= 2 {
            q += 1;
            if pattern[q] == c {
                matched = true;
            }
        } else if q < len && pattern[q] == b']' {
            break;
        } else if q >= len {
            // Unterminated class: Redis steps back onto the last byte so the
            // common `pattern++` below lands exactly on the end.
            q = len - 1;
            break;
        } else if len - q >= 3 && pattern[q + 1] == b'-' {
            // C `char` is signed on the platforms Redis ships on.
            let mut start = pattern[q] as i8;
            let mut end = pattern[q + 2] as i8;
            if start > end {
                std::mem::swap(&mut start, &mut end);
            }
            let ci = c as i8;
            q += 2;
            if ci >= start && ci <= end {
                matched = true;
            }
        } else if pattern[q] == c {
            matched = true;
        }
        q += 1;
    }
    (matched != negate, q + 1)
}

#[cfg(test)]
mod tests {
    use super::glob_match;
    use proptest::prelude::*;

    /// Hand-written cases; each was also checked against redis-server 7.0.15.
    const CASES: &[(&[u8], &[u8], bool)] = &[
        (b"", b"", true),
        (b"*", b"", false),
        (b"?", b"", false),
        (b"", b"a", false),
        (b"*", b"EURUSD", true),
        (b"EUR*", b"EURUSD", true),
        (b"EUR*", b"EUR", true),
        (b"EUR*", b"GBPUSD", false),
        (b"*USD", b"EURUSD", true),
        (b"*USD", b"USDJPY", false),
        (b"E?RUSD", b"EURUSD", true),
        (b"E?RUSD", b"ERUSD", false),
        (b"fx.*.spot", b"fx.EURUSD.spot", true),
        (b"fx.*.spot", b"fx.EURUSD.fwd", false),
        (b"h[ae]llo", b"hello", true),
        (b"h[ae]llo", b"hillo", false),
        (b"h[^e]llo", b"hallo", true),
        (b"h[^e]llo", b"hello", false),
        (b"h[a-b]llo", b"hbllo", true),
        (b"h[a-b]llo", b"hcllo", false),
        (b"h[b-a]llo", b"hallo", true), // reversed range is swapped
        (b"[a-\xff]", b"\xff", true),   // signed char: range is [-1, 97]
        (b"[a-\xff]", b"\x00", true),
        (b"[a-\xff]", b"b", false),
        (b"[a-\xff]", b"\x80", false),
        (b"[\\]]", b"]", true),
        (b"[\\-]", b"-", true),
        (b"[a-]", b"^", true), // `a-]` is the range ']'..='a'
        (b"[a-]", b"]", true),
        (b"[a-]]", b"]", true), // the second `]` closes the class
        (b"[a-]]", b"]]", false),
        (b"[abc", b"b", true), // unterminated: class runs to the end
        (b"[abc", b"d", false),
        (b"a[", b"ab", false),
        (b"a[^", b"ab", true),
        (b"[", b"[", false),
        (b"\\*", b"*", true),
        (b"\\*", b"a", false),
        (b"a\\", b"a\\", true), // trailing backslash is literal
        (b"\\?", b"?", true),
        (b"**a**", b"a", true),
        (b"a*b*c", b"aXbYc", true),
        (b"a*b*c", b"aXbY", false),
        (
            b"*a*a*a*a*a*a*a*b",
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            false,
        ),
        (b"Case", b"case", false),
    ];

    #[test]
    fn table() {
        for &(p, t, want) in CASES {
            assert_eq!(glob_match(p, t), want, "pattern {p:?} text {t:?}");
        }
    }

    /// Redis's nesting limit, probed live with N repetitions (PUBLISH result
    /// 1 = delivered): `a*`xN+`b` vs `a`xN+`b`: 1 for N<=1000, 0 for
    /// N>=1001; `a*`xN: 1 up to N=1001, 0 for 1002; `*a`xN+`*`: 1 for
    /// N<=1000, 0 for 1001.
    #[test]
    fn nesting_limit_matches_redis() {
        let rep = |s: &[u8], n: usize, tail: &[u8]| -> Vec<u8> {
            let mut v = s.repeat(n);
            v.extend_from_slice(tail);
            v
        };
        for (n, a, b, c) in [
            (999, true, true, true),
            (1000, true, true, true),
            (1001, false, true, false),
            (1002, false, false, false),
        ] {
            let text = rep(b"a", n, b"b");
            assert_eq!(glob_match(&rep(b"a*", n, b"b"), &text), a, "a* n={n}");
            assert_eq!(glob_match(&rep(b"a*", n, b""), &text), b, "a*$ n={n}");
            assert_eq!(glob_match(&rep(b"*a", n, b"*"), &text), c, "*a* n={n}");
        }
    }

    #[test]
    fn pathological_pattern_is_fast() {
        let text = vec![b'a'; 20_000];
        let start = std::time::Instant::now();
        assert!(!glob_match(b"a*a*a*a*a*a*a*a*a*a*a*b", &text));
        let mut p = b"*a".repeat(500);
        p.push(b'b');
        assert!(!glob_match(&p, &text[..2_000]));
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }

    /// Differential cases recorded from redis-server 7.0.15: every pattern
    /// was PSUBSCRIBEd and every channel PUBLISHed; `true` = delivered.
    #[test]
    fn recorded_against_redis() {
        let mut failures = Vec::new();
        for &(p, t, want) in recorded::CASES {
            if glob_match(p, t) != want {
                failures.push((p, t, want));
            }
        }
        assert!(
            failures.is_empty(),
            "{} mismatches: {failures:?}",
            failures.len()
        );
    }

    /// Straightforward recursive transcription of Redis's algorithm (without
    /// the nesting limit), used as an oracle for small inputs.
    fn reference(p: &[u8], t: &[u8]) -> bool {
        fn go(p: &[u8], mut t: &[u8]) -> bool {
            let mut pi = 0;
            while pi < p.len() && !t.is_empty() {
                if p[pi] == b'*' {
                    while pi + 1 < p.len() && p[pi + 1] == b'*' {
                        pi += 1;
                    }
                    if pi + 1 == p.len() {
                        return true;
                    }
                    while !t.is_empty() {
                        if go(&p[pi + 1..], t) {
                            return true;
                        }
                        t = &t[1..];
                    }
                    return false;
                }
                let (ok, next) = super::match_element(p, pi, t[0]);
                if !ok {
                    return false;
                }
                pi = next;
                t = &t[1..];
                if t.is_empty() {
                    while pi < p.len() && p[pi] == b'*' {
                        pi += 1;
                    }
                    break;
                }
            }
            pi == p.len() && t.is_empty()
        }
        go(p, t)
    }

    fn glob_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![
                4 => prop::sample::select(b"ab*?[]^-\\".to_vec()),
                1 => any::<u8>(),
            ],
            0..max,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn never_panics(p in prop::collection::vec(any::<u8>(), 0..40),
                        t in prop::collection::vec(any::<u8>(), 0..40)) {
            let _ = glob_match(&p, &t);
        }

        #[test]
        fn agrees_with_recursive_reference(p in glob_bytes(10), t in glob_bytes(10)) {
            if !t.is_empty() {
                prop_assert_eq!(glob_match(&p, &t), reference(&p, &t));
            }
        }
    }

    /// (pattern, channel, delivered) triples captured from redis-server
    /// 7.0.15: a sample of the ~2.97M random pairs (four seeds, several
    /// alphabets, high bytes included) that were run differentially with
    /// zero mismatches.
    mod recorded {
        #[rustfmt::skip]
        pub(super) const CASES: &[(&[u8], &[u8], bool)] = &[
            (b"***", b"]a", true),
            (b"b*", b"b\xdb\xb5", true),
            (b"*]", b"?]", true),
            (b"*b", b"]]]]b\x80[b", true),
            (b"?", b"\xff", true),
            (b"*", b"^*^\xb1\\", true),
            (b"[b[", b"b", true),
            (b"*", b"\x80[]?bb", true),
            (b"***[-\x01\x80[", b"\xd2-", true),
            (b"*", b"]-ab", true),
            (b"*?]", b"-\xfe-]", true),
            (b"?\x01b", b"]\x01b", true),
            (b"\xa7--\xfe-", b"\xa7--\xfe-", true),
            (b"b*]^\xf0]]", b"b-~b]^\xf0]]", true),
            (b"[**[b*", b"b", true),
            (b"?*", b"a]-b", true),
            (b"**", b"]\xf1]", true),
            (b"*\\?", b"]ba?", true),
            (b"??", b"\\4", true),
            (b"*", b"bbbaaba", true),
            (b"**", b"\xbfP", true),
            (b"?*", b"^^O]a", true),
            (b"*", b"? ", true),
            (b"**", b"--b]a\x80\x9ba\x80", true),
            (b"*", b"\\?\\^", true),
            (b"*", b"*]", true),
            (b"**?", b"*[a-[]", true),
            (b"*", b"\x0d\x7f[]^a", true),
            (b"**", b"];", true),
            (b"*^", b"[? ^", true),
            (b"[?a^j[", b"[", true),
            (b"*", b"]\xb0\x00", true),
            (b"*?", b"Y\xf2b", true),
            (b"??", b"\xff_", true),
            (b"?*a", b"\x02a", true),
            (b"*", b"\xd0", true),
            (b"[^*z\xd0*\\", b"\x01", true),
            (b"?*", b"^^\xdaO^\xff", true),
            (b"\xff-\x00\\", b"\xff-\x00\\", true),
            (b"[T\\^^[\xff", b"^", true),
            (b"?*", b"b?\x11[", true),
            (b"*", b"babbab", true),
            (b"*", b"?[-[", true),
            (b"**", b"-\x80", true),
            (b"-a\xfe-\xffz*b", b"-a\xfe-\xffzb", true),
            (b" \x00", b" \x00", true),
            (b"*", b"bz-", true),
            (b"*", b"[[a", true),
            (b"?*", b"\x14-a?[", true),
            (b"?", b"]", true),
            (b"**", b"-\x89baa", true),
            (b"?*[\x87?[^\xff", b"-ba^[", true),
            (b"]*", b"]^\\[/", true),
            (b"**", b"\x01--]^\x80", true),
            (b"[^ ?", b"\xdf", true),
            (b"*", b"\x80?b-\\", true),
            (b"[-[-aa", b"\\", true),
            (b"[\\-\xfb]*", b"-", true),
            (b"\\?^ba", b"?^ba", true),
            (b"?a***", b"\xc8a^b", true),
            (b"*[b\xffaa\x01", b"b bbaba", true),
            (b"[^b", b"?", true),
            (b"ba\xd9\\a^b*", b"ba\xd9a^ba[z", true),
            (b"a*", b"aba", true),
            (b"*?", b"^bb^^", true),
            (b"*", b"V-\x7fb\\", true),
            (b"?*", b"zb^", true),
            (b"*?", b"baaaaa", true),
            (b"*\xff", b"\x7fa\xff", true),
            (b"*b", b"*bb", true),
            (b"\\]*", b"]\x92", true),
            (b"*[\\ \\]--", b"[*[*\x80^ ", true),
            (b"\\]*", b"]?\x80a?", true),
            (b"*", b"a^^\\", true),
            (b"**", b"??a\\", true),
            (b"***[-\x01\x80[", b"-", true),
            (b"a\\ ", b"a ", true),
            (b"**", b"-za]", true),
            (b"*bb", b"abbb", true),
            (b"*\\\\\\b", b"b\\b", true),
            (b"*", b"\xfe", true),
            (b"**", b"b]b]", true),
            (b"*^", b"^\\a^", true),
            (b"*", b"?\\", true),
            (b"*[-^?u[]", b"]a^", true),
            (b"*", b"]\xf1]", true),
            (b"*[b\xffaa\x01", b"\x01", true),
            (b"***", b"abJ", true),
            (b"?*", b"oa", true),
            (b"*", b"-[?-\x7f", true),
            (b"^?", b"^-", true),
            (b"b[ba-b-[", b"ba", true),
            (b"aH", b"aH", true),
            (b"[[-a^?[", b"a", true),
            (b"\x01ba-", b"\x01ba-", true),
            (b"*", b"<]-b", true),
            (b"*\\", b"A?\\", true),
            (b"*", b"aa-]--\\", true),
            (b"*", b"b]b^^*a", true),
            (b"?[?[-", b"a-", true),
            (b"*", b"?\x01", true),
            (b"[^-\x01", b"\\", true),
            (b"*?", b"bbba", true),
            (b"*?]", b"]a[\x01[b]", true),
            (b"*", b"\x7f\xfe^", true),
            (b"b", b"b", true),
            (b"?", b"\xdd", true),
            (b"^??*", b"^a\x80a[", true),
            (b"*", b"]*b[z[\x15", true),
            (b"[-[-aa", b"[", true),
            (b"**[-bb?", b"-b]-", true),
            (b"?", b"\\", true),
            (b"*", b"[-]-^a\\b", true),
            (b"**?", b"bb[-]{\x08]", true),
            (b"b[ab\x00-*-", b"b-", true),
            (b"*a", b"\x82aa", true),
            (b"?*", b"--b-\x80", true),
            (b"*", b"a]", true),
            (b"*", b"b-", true),
            (b"]*", b"]b-\xe8^a", true),
            (b"*", b"d]\x90--a^a", true),
            (b"*bb", b"bbaabbb", true),
            (b"?[^[\\^B[", b" a", true),
            (b"?a***", b"baa", true),
            (b"?\x01", b"?\x01", true),
            (b"*", b"-b", true),
            (b"[bb\xee?", b"?", true),
            (b"[\xff-b", b"\x00", true),
            (b"?", b"\xf8", true),
            (b"]*b*", b"]b\xb8\\", true),
            (b"*?-", b"]b\xff-", true),
            (b"*[?0[\\]^", b"[-a^?]", true),
            (b"**", b"-\xc5-", true),
            (b"[a?^-]", b"?", true),
            (b"*", b"a\\\\\x00b*", true),
            (b"*[\\ \\]--", b"\x01\xf8]^]", true),
            (b"*]", b"b]", true),
            (b"?*", b"\\", true),
            (b"**", b"\x80\xe6bbaab", true),
            (b"*?[\xff\\", b"bbaba\xd2\xff", true),
            (b"a[\x80-\x7fa", b"a\x1b", true),
            (b"*?", b"a?", true),
            (b"?", b"\x9e", true),
            (b"*[-^--", b"bb\xff-]", true),
            (b"*[*", b"]aa\xdf*", true),
            (b"***", b"b\xfe\xad\x01-b", true),
            (b"*", b"b\xef\xad\x01a\x01b", true),
            (b"*?", b"*\\\xd4?", true),
            (b"-*??", b"-^*-", true),
            (b"*", b"b\xe7]b", true),
            (b"^^?^\\[", b"]^b", false),
            (b"-?*-? ", b"\x01b\x01aa", false),
            (b"a?[", b"a N\x7fz--a", false),
            (b"\\\xcf\x7f\x16^-z", b"\x01\x80[", false),
            (b"[a\\\\[", b"#?", false),
            (b"*?[\xff]^?", b"-b]-^az", false),
            (b"\xff^\\* ", b"] ]-\x93b", false),
            (b"b?]*-?", b"--", false),
            (b"\xffbbD\\?", b"a?", false),
            (b"?^b", b"\x80", false),
            (b"[", b"*[\xea??\xee*", false),
            (b"??^\xd8", b"^*", false),
            (b"b]*?[[", b"X\x0b[^bbb", false),
            (b"a\\", b"?]b-\\a", false),
            (b"^-*?", b"]^[b^a", false),
            (b"\x00?\xffa", b"\x80\x0cSbza]", false),
            (b"^^\x00]\\a[\xf0", b"a*a\\", false),
            (b"[\xff]\x80", b"*\\?-\xff?", false),
            (b"]]\xfe\xaa][\\[", b"\xc5\xe1b-[a]^^^]", false),
            (b"\\\\*\xb4", b"\x9cj]\\", false),
            (b"[\x80[^b", b"\x80b[-", false),
            (b"?*[\x87?[^\xff", b"b\\", false),
            (b"*b][\\a\x7f", b"b\xd8aa\\*a", false),
            (b"^]\\-\\", b"\x96", false),
            (b"\\\x01\x7f?z*[^", b"\xc5", false),
            (b"-?^\x00", b"h]b\x80\\", false),
            (b"\x09^^[A?", b"bab", false),
            (b"\\[ba", b"[^^?]a]", false),
            (b"*@b?[]", b"\xe2[", false),
            (b"]\xc7^b\\", b" ", false),
            (b"[\\", b"[?", false),
            (b"\xd4*??\x8e[", b"--^^]a", false),
            (b"?N[a?[", b"a[-\xf2[", false),
            (b"\x80?", b"ab", false),
            (b"\\*?", b"bb\xb8\\", false),
            (b"^\xa8z\\a", b"b\xff^]-aa]aa", false),
            (b"\xffab\\]", b"\x80a2bbba", false),
            (b"\\*\xbd\xff\xdd\\ \x80", b"\x80abb[ a^", false),
            (b"[", b"b^\xa6a[*[", false),
            (b"-\\", b"\x00bbb b", false),
            (b"\\[", b"\x80\x0cSza]", false),
            (b"\\az", b"a N\x7fz--a", false),
            (b"?\xff^]\x95", b"[-\x8b\x08?", false),
            (b"a\\", b"b[\xfe[b", false),
            (b"[][[\x00-\x01", b"\\]-a\xffb\xf4", false),
            (b" ?*\xff ", b"^\x01]]", false),
            (b"^^?^\\[", b"-z-^", false),
            (b"a?][bbab", b"a b\x8c", false),
            (b"\x17]ba\\\xffa", b"a\x01\x7f\x80\x01", false),
            (b"b[b?b", b"^b*", false),
            (b"a^*?", b"]]", false),
            (b"\x80[ba*[[", b"\x01ba\x00aab", false),
            (b"?]\\[[", b"\\^]", false),
            (b"z*\\^\x80", b"-\x80", false),
            (b"*\x0e?", b"\x14-a?[", false),
            (b"^?^\\a-\x8f-", b"\xcc^[a", false),
            (b"abN-b*?", b"]a^", false),
            (b"*\xa9\\?-", b" ", false),
            (b"a[*?\\*-\x80", b"[-]-^a\\b", false),
            (b"?\\", b"\\a\xe1b-[-", false),
            (b"[\xb7\\^?", b"]abb-^b^", false),
            (b"*^ \\*\\b-", b"^", false),
            (b"a*-a[", b"]b\\ -", false),
            (b"[[a ?\x80^[", b"b^a", false),
            (b"aa-]--\\\\", b"\xdbb\\^]ba\\", false),
            (b"\xff[[a*-\\", b"a^]", false),
            (b"^\xff*[", b"?b[*?", false),
            (b"a?[", b"bbbabba", false),
            (b"\x80b-\\", b"\xd4??\\\\^", false),
            (b"\x05\\-b?^", b"]^\x1d-[", false),
            (b"^\x01 ab\\", b"^a]\\[a", false),
            (b"-*\xfe*^\\[", b"-?-?-**", false),
            (b"^]\\-\\", b"[\x7f^[", false),
            (b"?] ", b"^- -*b", false),
            (b"?*a\xa2^]\\", b"]a[]a?a", false),
            (b"^[aab", b"^-a]", false),
            (b"@!\\]b[?", b"---a?b\xff", false),
            (b"a?b]", b"-][", false),
            (b"^\\*^\xb1\\", b"^za]", false),
            (b"b][]", b"^\xf4", false),
            (b"\\\\-b\\-[", b"\xff", false),
            (b"[\xfeb\xff\xf4-", b"][[b]]b", false),
            (b"?\x00^\\", b"\x7faaaaaa", false),
            (b"?]", b"-\x80 ", false),
            (b"[\\aa]", b"b\xfe", false),
            (b"\\?^[\\", b"-\xc4", false),
            (b"-[fab\\b", b"]]-[a\x7f\x80", false),
            (b"\\-", b"abbba", false),
            (b"]\\a?-", b"b]b^^*a", false),
            (b"^b^-*\xd7[", b"nu^^a^", false),
            (b"?bb]", b"]\x01-[^3b", false),
            (b"a?\\M\\^\\ ", b"-^k-^-", false),
            (b"[\x00?", b"\xe8\xae", false),
            (b"*b?\\\xa0]y", b"\xc3^u b\xe3\x7f]", false),
            (b"\\-[", b"]b", false),
            (b"]]\xfe\xaa][\\[", b"\xfe*][]b", false),
            (b"ab??a", b"^b^-]-\\", false),
            (b"\\b?q-[]\\", b"-\x7fza-", false),
            (b"[", b"^a-\x7f\\", false),
            (b"-[*", b"^]]\\", false),
            (b"b^[]b^\x13", b"yb\x92abba", false),
            (b" ?z*\x9e^*", b"-^", false),
            (b"-\\^k??-", b"^^]", false),
            (b"*\x01-[?*", b"\\[\"\xb8", false),
            (b"\\pb\x80^", b"\xfe\xff-", false),
            (b"\\^[\x99[", b"b^\\][a-", false),
            (b"\x01^Q\\[", b"*", false),
            (b"^[\\\x7f?\\^a", b"\\b", false),
            (b"\\\x9d?a", b"]-\x09b-", false),
            (b"\\ba\\^^\x80]", b"bb^a-", false),
            (b"7*a\x80?\x00", b"b^a", false),
            (b"^\x01 ab\\", b"\xc3^u b\xe3\x7f]", false),
            (b"\x9fa\\\x85\xff", b"*\xae)", false),
            (b"b\\*?", b"]?*\\[", false),
            (b"^\x11\\^*", b"z^", false),
            (b" \\[^[\xfe", b"^a", false),
            (b"?]![[^?-", b"\\-", false),
            (b"\\\\", b" aa-", false),
            (b" ?*\\-", b"[", false),
            (b"*]\\[", b"\xfe\xc5a", false),
            (b"**", b"]a^]-a\x80a", true),
            (b"[*-?bl^]*", b"-a\x06", true),
            (b"*a^\xcf^[[[ba\xff\xf0", b"a^\xcf^[", true),
            (b"*", b"aaaabb\xfeaaaa", true),
            (b"b[bb*\x12-", b"b-", true),
            (b"?**", b"\x00a\xfe]a]", true),
            (b"]*a*[a\xff", b"]a[b\xff", true),
            (b"*]", b"a\x00]]b\x13-]", true),
            (b"?\xfb?\x80", b"a\xfb-\x80", true),
            (b"*[\\\\-a\\*-\\][", b"[abzb]^]b[", true),
            (b"?*", b"**b]*-\\a?-[", true),
            (b"[*-?bl^]*", b"-b\xfe", true),
            (b"*?", b"bbaba aaa", true),
            (b"*?", b"[\x00\x7f", true),
            (b"*^", b"\x7f]*\\^", true),
            (b"?**", b"-a*\xff]^]", true),
            (b"-\\b\x80", b"-b\x80", true),
            (b"*[[?\xfe**\\a?", b"]b]-ae][", true),
            (b"[*-?bl^]*", b"ba-*", true),
            (b"*", b"]]^b b^-^a]^", true),
            (b"*[[?\xfe**\\a?", b" ^^\xff[", true),
            (b"*[-^ba", b"abaaa", true),
            (b"*??", b"[]ba\\]]b ?U", true),
            (b"*", b"a*", true),
            (b"\xff**", b"\xffb^", true),
            (b"\xa5-\\Ca", b"\xa5-Ca", true),
            (b"b*", b"b\\\x80]?^]-?*", true),
            (b"?]*[^[-*ab[", b"]] ]", true),
            (b"a[-?h-*bb\\a\x88", b"a?", true),
            (b"*", b"[^-]^-b\\\x0dbba", true),
            (b"*]", b"-]", true),
            (b"*[\xff\\", b"?\xff", true),
            (b"*[-^ba", b"?\x7f-[\x7fb]?\x01\x88^", true),
            (b"[*-?bl^]*", b"bbbbaba", true),
            (b"**", b"\\", true),
            (b"-\xc2*\xff]^a\xff[-]", b"-\xc2[-\xff]^a\xff-", true),
            (b"*", b"^a-", true),
            (b"*\x80*", b"]ai\x0ab-]\x80\x9d", true),
            (b"*??", b"\xfea]^", true),
            (b"*", b"\x8a^a[]\xff", true),
            (b"*?a", b"a\xdc\x15 bbbb\x00b\xffa", true),
            (b"*^*", b"\xba ^-\xe2^-/", true),
            (b"[-\\?bb-", b"?", true),
            (b"]*", b"]]^b b^-^a]^", true),
            (b"*", b"\xe6baaaa", true),
            (b"?**", b"?]b-^^", true),
            (b"*[^^", b"^b", true),
            (b"*?", b"b\x17ababa", true),
            (b"*\\b[a*", b"ba", true),
            (b"*[-^ba", b"aaaaa", true),
            (b"*?", b"\x00-\x01\x7f", true),
            (b"*[^^", b"*-]", true),
            (b"[z?", b"?", true),
            (b"\\\\*", b"\\^ra\xfe^]]]a\\", true),
            (b"*", b"bbbb\xbf5ab\x00", true),
            (b"*", b"v[?^*^\\a[", true),
            (b"*", b"\\b", true),
            (b"*", b"-\x7f", true),
            (b"*[\\\\-a\\*-\\][", b"ab]] b\x00a", true),
            (b"*?", b"a]\xff\xfe", true),
            (b"*", b"z-*", true),
            (b"]*", b"]]]]", true),
            (b"*", b"b!a", true),
            (b"?**", b"bbbbW\xfe", true),
            (b"*", b" -]", true),
            (b"?", b"*", true),
            (b"*??", b"\xc5\xa4aaaaa", true),
            (b"*?", b"bbbbababb\xf5aa", true),
            (b"**", b"U*-b[a^", true),
            (b"*", b"abbb\x80aaabb", true),
            (b"*?", b"\x80?", true),
            (b"*", b" -", true),
            (b"[^^\xfe\\", b"\x0a", true),
            (b"?-a \\b-^", b"^-a b-^", true),
            (b"*", b"\xb1-", true),
            (b"*?", b"]\\^V^", true),
            (b"?", b"\x1a", true),
            (b"*", b"aabb\x15", true),
            (b"*?", b"]\x01\xff]?\\-\\b[", true),
            (b"**", b"z]\x80\x91b", true),
            (b"*", b"\x00-\x01\x7f", true),
            (b"[\x80", b"\x80", true),
            (b"[a\x7f[-b[\x7f", b"\x7f", true),
            (b"*?", b"\x01\x80][", true),
            (b"*?", b"\\\\\\]T^?\x0e??]", true),
            (b"*??", b"^^", true),
            (b"^*", b"^--\\", true),
            (b"]*", b"]]-", true),
            (b"*", b"bb]{?\\*-aba\\", true),
            (b"*", b"\x80^\x80-aVz-z", true),
            (b"[^^ aa->-$\\", b"\x7f", true),
            (b"*\\][b-^a]", b"a^b]\xde]]^", true),
            (b"*-", b"\\^\\b-*a \xbc-", true),
            (b"*?", b"baaaaaaaba", true),
            (b"*a", b"-[[^?-**aa", true),
            (b"??", b"]^", true),
            (b"?*\\^", b"]]^b b^-^a]^", true),
            (b"[^-[\xff^?-}za=", b"\x80", true),
            (b"??*[`-\x01", b"\x1d-\\", true),
            (b"", b"", true),
            (b"*?", b"\xd6", true),
            (b"*", b"ba\x18\xe5a", true),
            (b"*[-^ba", b"b\xff^", true),
            (b"??", b"b\x7f", true),
            (b"?**", b"\x01-b", true),
            (b"[^^P", b"\\", true),
            (b"*?", b"-\\a\\\x8ab-", true),
            (b"*", b"baa\xfe\\a", true),
            (b"[*-]^^[?--b", b"*", true),
            (b"*??", b"baaaaaaaba", true),
            (b"\x7f^", b"\x7f^", true),
            (b"*", b"\xbc[bz", true),
            (b"\\*\\??*?**", b"*?^aa[\x94q-", true),
            (b"]?", b"]]", true),
            (b"[bbaa\xca*\x01[**", b"*", true),
            (b"*?", b"*\\\x0d-", true),
            (b"*\x80*", b"\x80]zaa\xdd?-]", true),
            (b"?", b"P", true),
            (b"*\x80*", b"ab\x80\xc2\xa4ba", true),
            (b"*", b"baab", true),
            (b"?]*[^[-*ab[", b"\x01]aba\xf2\xac\xed", true),
            (b"**[?a^\xb4^*\x80?a", b"\x7fE\x0b^", true),
            (b"**", b"\xffa?^", true),
            (b"*", b"ba$baza ", true),
            (b"?**", b"ba", true),
            (b"\\a?**", b"a\\[?b?a]\\[[a", true),
            (b"*", b"\x00\x80-\\?\xd4]? ]", true),
            (b"\\?]-^^", b"?]-^^", true),
            (b"b*", b"b]*\x97*[", true),
            (b"*", b"aba", true),
            (b"a\x7f?", b"a\x7fa", true),
            (b"*^*", b"- a**^*?[a", true),
            (b"*", b"]a\xfe^*\xce\xfb", true),
            (b"**", b"a^\xc8[]", true),
            (b"*?", b"^???b\xfeb*\x80*[[", true),
            (b"?**", b"\xc7\xbfb^-^", true),
            (b"*", b"\xff[b-b:\xd5^", true),
            (b"\x80]zaa\xdd\\?-]", b"\x80]zaa\xdd?-]", true),
            (b"*??", b"\\?-", true),
            (b"?**", b"]??\\b]\\\\?", true),
            (b"[b*b[\x01[^[^\x18[", b"[", true),
            (b"?*", b"b\x80P", true),
            (b"*", b"^\xff^7J\x7fa\\\xe3a", true),
            (b"[^", b"[", true),
            (b"?\\[", b"b[", true),
            (b"*", b"]\x9f-?[?z?[\x7f]*", true),
            (b"*", b"?]\x8f]", true),
            (b"[^]a*", b"aabbbaba\x01b", true),
            (b"\xffb\\", b"[-a", false),
            (b"\xffb\x00ba?[?^", b"]\xe5?]-", false),
            (b"?b*^", b"]ab]\\", false),
            (b"-?]?[\xc7\x04]", b"b", false),
            (b"^a\\-]*", b"*?b?[\\?[\x1d^z?", false),
            (b"]\x80? \xfea\\]aba-", b"a\xffaa]-aa\x9d", false),
            (b"*\xff[]*", b"*", false),
            (b"]^b\\b]^", b"]\xfe]", false),
            (b"]][b?\x00b[", b"b\x80^a", false),
            (b"\\[*\xfe", b"[\\", false),
            (b"b[bb*\x12-", b"]^??\\b", false),
            (b"aa]\x80\\", b"zb[^^", false),
            (b"ba\\??][a", b"][??]]", false),
            (b"\\\\", b"%]\xf5b$]\\", false),
            (b"*]\xd1\\][^*?b\\", b"R]\xa1", false),
            (b"\\-* -]-b-", b"--^\x09\x01b", false),
            (b"]\xe7]\xff\xff?^", b"[-\\^][]b]", false),
            (b"a-^?", b"[\x80", false),
            (b"a*[[[", b"\xfe-", false),
            (b"[\xa3[x^bb]?*]", b"a\xffa", false),
            (b"\xffb\\", b"?\\", false),
            (b"\xff\\\\a*]**a", b"\xfe]", false),
            (b"^[][[\xd7\\[^", b"bbb", false),
            (b"?\\^", b"abbb\x00ba", false),
            (b"]^[^ab", b"aba\xffaa\xffa", false),
            (b"[a[^*a\\[]\\", b"[]b\xff-", false),
            (b"b[*^\xf0^\\-", b"-\xff?", false),
            (b"**[?a^\xb4^*\x80?a", b"\\?]\x09", false),
            (b"b\\\\--ab", b"abab\x80-\xc9]\\a", false),
            (b"-?", b"\x7f\\-", false),
            (b"*?\x7f\\**", b"[ba-a9\xb4", false),
            (b"?\\^\\a-?\\", b"\x01*bba^", false),
            (b"\xae?^[?-", b"b-\x84[b>]\x7f", false),
            (b"\x80\\**", b"-", false),
            (b"[?za", b"^[]]\xb9?", false),
            (b"\\", b"\\^", false),
            (b"[*[*a>", b"a-[]-[", false),
            (b" ][]\\]^-[]a\xeb", b"[*", false),
            (b"b ?\x8c^", b"-^\xfe", false),
            (b"-]-[\xa4\xff\xc0[b\x00a[", b"\xca[][", false),
            (b"-\xb3a[\xfebb-\\\\[a", b".\xff\xfa\\", false),
            (b"\\-", b"]\\-", false),
            (b"\x7f[[]\xff", b"]\x92abz-", false),
            (b"?\\*a\xffa]^]b[", b"\x80]b", false),
            (b"^?\xfe*-]aa\\^", b"\x80b", false),
            (b"b-b?*^b", b"bbab ababaa", false),
            (b"b]aa\\^-*-[]", b"+?a", false),
            (b"ab^?\xff*]-a", b"?\xfe-a\\?b-ba?", false),
            (b"[a^", b"?]] \\X^", false),
            (b"-b^[", b"][-a", false),
            (b"*^-b\x0a^b][", b"-[", false),
            (b"b^[]*", b"[]-a", false),
            (b"aLM\xfe]b??bbb", b"b]-[y", false),
            (b"]^[\xfb][", b"^\xd5a", false),
            (b"a^m[b**]^^^b", b"\x00\x80^?[\xfd\xcb]-", false),
            (b"\\^*\xfe^\x00\\", b"-b^aab\xff\x7f^a", false),
            (b"[^", b"\x90a", false),
            (b"b*]b^-?", b"[a*\x01a*\\\x7f\xff\x93\x7f", false),
            (b"[]\\", b"-a]a\x01\x86z", false),
            (b"\\\x00]b\\\xfe", b"]ab]\\", false),
            (b" ][]\\]^-[]a\xeb", b"g3]", false),
            (b"\x10\\*", b"ab", false),
            (b"^\xa9^?", b"?a", false),
            (b"\\bb", b"\xbb?cab\\C\\ ", false),
            (b"^ma?[[^]", b"\x00\xea-aD", false),
            (b"?a\\^??-^", b"b*\x06*\xa9v]*^b\xd4", false),
            (b"\x01\\\x80[]*a-b\xfeb\\", b"]\x80a^a^aa", false),
            (b"\\-?z[a", b"bbbbaababab", false),
            (b"?a\\a?^*b", b"b^*\x83-?", false),
            (b"a[?^*]*\x09[-*", b"^\xa0ba", false),
            (b"[\x80-\x81\\", b"-]]]a", false),
            (b"b\\", b"bb]{?\\*-aba\\", false),
            (b"8]]a[", b"z\x80aa\xfeb", false),
            (b"ab\\", b"-\x80*", false),
            (b"b??-*]?", b"\xff]", false),
            (b"^-]^^?a\xe9\x98az", b"n", false),
            (b"\xfe\\\xff]A]*a\\-]^", b"^]-u-]\xeaa-]\x00^", false),
            (b"?^a", b"L[[5]", false),
            (b"\\*-a\\z?^bb", b"aa", false),
            (b"-^\x97*[^-", b"-]\xf2ab*-a?^", false),
            (b"aa?\x00a\\", b"\x18^\xf4b]bz]a^", false),
            (b"b([]]a\x80[-*\\", b"baa\xf0a\x00b", false),
            (b"[]*\x01*\\", b"[ba-a9\xb4", false),
            (b"?\xfe\\b", b"^bb-", false),
            (b"\\", b"R]\xa1", false),
            (b"?^^\\-\xbe\\*\\*", b"\xff\xfca[[b*ab-^[b", false),
            (b"ba[^]N\\--", b"a]", false),
            (b"^]]baa?", b"?", false),
            (b"^]]baa?", b"U*-b[a^", false),
            (b"[?^-b", b"--x-", false),
            (b"[\xfa\xd6*a\x7fa[*b\xfe\\", b"bbbb", false),
            (b"^[\xfe][", b"\xfe\xff\x80", false),
            (b"[]]*^aa\x99!\xc0-", b"Ia^]^a\x80\xabb-\x8fa", false),
            (b"b\\\xfe", b"ab bba", false),
            (b"\\a^\x80i[\\]\xee", b"\x9b[\\b\\[?z", false),
            (b"ba*/^a?\\-", b"-b-\\?\\\x00\x15]\x7f", false),
            (b"bb[", b"a\xa5 a", false),
            (b"*V]\xcda?[\xd1", b"\x7fba", false),
            (b"&?^*a", b"\xdaaa", false),
            (b"\x80[\x01a\xc3-[", b"b*b*\x89D?\xd4", false),
            (b"\x80?", b"P", false),
            (b"?^]\\ba*^b", b"-]ab-*\\", false),
            (b"ba^*\\", b"\x80a\\", false),
            (b"]\\^\x01\x02\xff[\xdc", b"]^]b^^b]]-", false),
            (b"?b\xc4^\\W\\^^-?[", b"a\x7f]^\xfe[", false),
            (b"^\x12--?[?[*", b"^-[ ", false),
            (b"*b8a*]-*\xfe??z", b"-][", false),
            (b"]\\??\\^^", b"-a]^", false),
            (b"A^^?ab\\a9", b"^\x00]b[]^]", false),
            (b"\x01?]??", b"^\xff\xfaa]", false),
            (b"\x00*i-b*a[I-", b"z", false),
            (b"\\^", b"\x01]^-b)a\xd2", false),
            (b"a\x00*?", b"-\xd7-", false),
            (b"^\x00\x80[\x9b\x12", b"*?b", false),
            (b"^b[<\xfe[b^", b"\xff-\x00\x01*b?]", false),
            (b"]?*^", b"*-]", false),
            (b"*\\?-\\", b"\x7f[a\x00aV", false),
            (b"?b", b"a\x00]]b\x13-]", false),
            (b"][^G-^a", b"z^V-]b*", false),
            (b"[\xf7]", b"[b\x80^]^^^ ", false),
            (b"**?a?*", b"bGb\xd7\x80b\x7fab^baa-\x80b", true),
            (b"*", b"][C?\\?]", true),
            (b"b*", b"ba]bs-", true),
            (b"**?a?*", b"baaib", true),
            (b"\x80?", b"\x80b", true),
            (b"**", b"b\xb7\x00bbbb\xffaaaaa-b]za", true),
            (b"****", b"aaaa\xfe", true),
            (b"*?**", b"\xff", true),
            (b"*?*", b"**", true),
            (b"*?bb*", b"abbbbaDbb", true),
            (b"?ab*", b"babbbabba\xff\xff", true),
            (b"*a", b"ababba", true),
            (b"*?", b"\xffa-aqb", true),
            (b"bb*", b"bb\x01ba\xfeb\x80[b]\xbbaaaa", true),
            (b"?a*", b"aabbaba&pbabbabb=vaa", true),
            (b"?*", b"\x0e\xdbbbbabba\xeabaa", true),
            (b"b*?", b"ba bbbbabbaba", true),
            (b"?*", b"\xfe^\x00ab\x01-", true),
            (b"*a*a?*", b"a\x8cbaabb\x11baba ", true),
            (b"*?", b"]\xa2^aaaaabb[a\xa8-]ab", true),
            (b"****", b"ab^b", true),
            (b"?*b*b*?", b"aab\x1bbb[a-a", true),
            (b"*ab***", b"a^u\\ab?]-", true),
            (b"?*", b"]^-b\x7f\\]", true),
            (b"?*", b"-^*][?eb\\", true),
            (b"*a?ab*?b", b"lababSbabababb", true),
            (b"a*??**?", b"ab]\xf0]b]--b-bba9[-b^", true),
            (b"**", b"\x00b\xfe", true),
            (b"?*", b"b] \xa5b\\[^\\b[a", true),
            (b"*ba", b"]^b??][?[Bba", true),
            (b"?*", b"--ba---^-baa", true),
            (b"*", b"\x01ab]\x01\x80[[\xfeba", true),
            (b"****", b"za[bbb", true),
            (b"*", b"b]", true),
            (b"a*a", b"abbbbaabaa", true),
            (b"**", b"babb\xc4", true),
            (b"ab*", b"ab[abSab[[[\x01ab^ba[b", true),
            (b"*", b"b_b[bba\x11bab\x7fbbbaa", true),
            (b"?*", b"*-", true),
            (b"[\xff[", b"[", true),
            (b"*", b"ba^aa", true),
            (b"**b?**", b"?bbz\x7f-", true),
            (b"b*ab**b*b", b"bbababbab\xb1baabb", true),
            (b"*?a?*a?", b"abaaa\xfe\x85][--abbba\x00aaa", true),
            (b"*?b", b"baab\xcb\x00abaaz b[a-bb", true),
            (b"*ab***", b"ab", true),
            (b"**??", b"aabb----bbbbb", true),
            (b"?a**", b"]aa\x00v[b", true),
            (b"****", b":\x7fb", true),
            (b"****", b"[]bb]\xff\xbea--ba", true),
            (b"*?**", b"]*\x19\\\x03[-", true),
            (b"?*", b"^**]a**^]a\\a]\\*\\b", true),
            (b"*[b\xffa", b"-]a\\b", true),
            (b"b?*", b"baab[[a", true),
            (b"?*", b"*\\a\\a-a[ba][[", true),
            (b"??*???*a", b"\xfe]-b aaa", true),
            (b"*?", b"ab\x80\xee--{a]b-\x1a-aaa", true),
            (b"?**a?", b"bbb\xd9Gbba ", true),
            (b"**??", b"a][[azabab^aab\xea", true),
            (b"????*", b"abb\xff]]r\x00\x80]bbaaa", true),
            (b"a*b\xa2?*bbab?*\xffaa\xfe", b"\x01ab]\x01\x80[[\xfeba", false),
            (b"-", b" *-\\\\^\xe0z", false),
            (b"*g?abb\xb3", b"*\\?\\*[^**bb]a-a-*a-\\", false),
            (b"b?\x80*\xfe***??ba**a", b"bb-\x01a\xa7", false),
            (b"*b*?\xb0", b"?a[]?\\b[J?b", false),
            (b"a?a*b*?", b"\xffaa-ba\xa9", false),
            (b"a?ab*\x7f", b"b\x00b\x1baTa-aaaab\xfe", false),
            (b"*?* ", b"\\^-*-*a]", false),
            (b"**-b?*abb**b\xa33*\x7f", b"\x80\\b??\x0a?-b?[***[", false),
            (b"*?\x8baaaaba??\xfe\x7f**", b"*ab[", false),
            (b"??M", b"\xff*\xffza]\xb3^?^\\\x7fa[", false),
            (b"b?abab", b"-]b]b-z[]\xfeb]\xe7a\x7f", false),
            (b"\xc8", b"\x80aaVb\xdda", false),
            (b"?\xf9\xb1*?\x80*b*gb}b*a", b"^b^b-\xd5-\x00", false),
            (b"aa*?ba\x01bb*??a*", b"-\\-[?p^\\a^b\xffbb]]*][[", false),
            (b"?a", b"-\\?^\\?", false),
            (b"b\x04b?*?*a*#b?b\x80aa", b"[\xce\\**baa\x00-b]]^^\x80\x80-?b", false),
            (b"b#a*b*\x83?a\x95\x80?aa\x09*", b"bba \x80b\x80aaba", false),
            (b"*b?a**??*K*", b"]zbbbe", false),
            (b"a\xfa", b"baaib", false),
            (b"a\x00?\xff?a?b?**", b"z[^*bb*-", false),
            (b"\xff?a*??a\xfc\xff", b"?^[\x80\x7f\\", false),
            (b"a\xfea*?a?L|*b*", b"\\a^b-[-b]a\\*[^-2G]", false),
            (b"-\x9f", b"?\xe3^^\x85-a?]]]s\xffba\x0f\\", false),
            (b"babaf*?aa*aa\x00", b"a[a\x14baa", false),
            (b"ababaa\xfe", b"abb\xfebba", false),
            (b"aaaa**ab?", b"bbb\x01\xf3abbaEa\x8caa", false),
            (b"*\x88?b?*\x00b\x7f?*ba", b"-\\]a", false),
            (b"?\x9b", b".gb\x01bb", false),
            (b"?a?babab*b*bba", b"aa[aa,\x9azb", false),
            (b"\xd9a?*", b"^?a\\z\xf4[b*", false),
            (b"b*?\x7f*aa*a**a\x01ba", b"a]aaa/a]", false),
            (b"bba*", b"\xc4-\x15\x7f", false),
            (b"baa ab\x7f\x82bba\xfea?a", b"baaa ab\x7f\x82bba\xfea-a", false),
            (b"a\x7f?b*?bX*a", b"\x82K\xfea]aa", false),
            (b"a*b**b?", b"\\a[aa\x00\xff\\[^-", false),
            (b"*-a^", b"\x7f-\x08a", false),
            (b"b*a*", b"aa\x7faabakbaab\xfebbb\xa4\xfeab", false),
            (b"a?\xff \xfe?*<", b"ba\x15\x7f]bb^\x9d", false),
            (b"\xf6*?**b?b*a*?", b"aa-ba\x01[\x00-]a^b", false),
            (b"\x1dbb?*", b"\xef\x0aa--\x7fb-b]-a\x15\xfeb", false),
            (b"bbb*?\x84???*b", b"bb\x01ba\xfeb\x80[b]\xbbaaaa", false),
            (b"\x85?baaazbbbbb**?\x1f", b"\x18-aab-a\xff]", false),
            (b"abba*?bb*", b"aabbbabajbba\x16abbb", false),
            (b"]", b"\xff\x89\xff*^-[\\[", false),
            (b"ab*b*?*?ba", b"--bYaa\xdc[zbbba\x00aaa", false),
            (b"*bYa\xdc*zbbba*a*", b"a\x80\\\\[[?\\]+]\\V?<\\a", false),
            (b"b*a\x97aa*aba", b"]?^^[?[-", false),
            (b"bbL", b"^\xf0-\x8az\\*b-][-*", false),
            (b"??b?b?z*\xfeb*?\xe7?\x7f", b"a9-\x1fwbb aaza\xd9b]", false),
        ];
    }
}
