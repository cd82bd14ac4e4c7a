//! Inline requests: a command sent as one text line (`SUBSCRIBE EURUSD\r\n`),
//! as `telnet`, `nc` or a hand-written script sends it.
//!
//! [`parse_inline`] frames the line as Redis 7.0's `processInlineBuffer()`
//! does (up to the `\n`, a `\r` before it dropped, at most
//! [`Limits::max_inline_len`] bytes), then `split_inline` splits it into
//! arguments: a port of Redis's `sdssplitargs()` that produces byte ranges
//! into the line instead of copies. Token boundaries and the "unbalanced
//! quotes" verdict follow Redis exactly; the tests check them against a
//! transcription of `sdssplitargs()` and against verdicts recorded from a
//! live `redis-server` 7.0.15.
//!
//! # Deliberate deviation from Redis
//!
//! Inline arguments are byte ranges of the input, so arguments that Redis
//! would have to rewrite (escape sequences inside quotes, or a quote that
//! starts in the middle of an argument, as in `a"b c"`) cannot be
//! represented; they are rejected with the tickfan-specific
//! [`ProtocolError::UnsupportedInlineQuoting`]. Plain `"quoted args"` and
//! `'quoted args'` work, and inputs Redis rejects as unbalanced are
//! rejected with Redis's text.

use std::ops::Range;

use super::errors::ProtocolError;
use super::parse::{error_at, Limits, Parsed};

/// Parses the inline request at the front of `input` into `args`; the
/// contract is [`parse_command`](super::parse_command)'s.
pub(super) fn parse_inline(input: &[u8], args: &mut Vec<Range<usize>>, limits: &Limits) -> Parsed {
    let max = limits.max_inline_len;
    let window = input.len().min(max.saturating_add(1));
    let Some(nl) = memchr::memchr(b'\n', &input[..window]) else {
        return if input.len() > max {
            error_at(input, 0, ProtocolError::TooBigInlineRequest)
        } else {
            Parsed::Incomplete
        };
    };
    let end = if nl > 0 && input[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    match split_inline(&input[..end], args, limits.max_args) {
        Ok(()) => Parsed::Command { consumed: nl + 1 },
        Err(error) => Parsed::Error {
            consumed: nl + 1,
            error,
        },
    }
}

/// C `isspace()` in the "C" locale: what `sdssplitargs` skips between words
/// and accepts after a closing quote.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Redis's `sdssplitargs()`, producing ranges into `line` instead of copies.
/// Token boundaries and the "unbalanced quotes" verdict follow Redis exactly;
/// tokens Redis would rewrite are reported as unsupported once the whole
/// line has been validated.
fn split_inline(
    line: &[u8],
    args: &mut Vec<Range<usize>>,
    max_args: usize,
) -> Result<(), ProtocolError> {
    let n = line.len();
    let mut i = 0;
    let mut needs_rewrite = false;
    let mut too_many = false;
    loop {
        while i < n && is_c_space(line[i]) {
            i += 1;
        }
        if i == n {
            break;
        }
        let begin = i;
        let mut range = begin..begin;
        let (mut in_dq, mut in_sq) = (false, false);
        loop {
            let c = line.get(i).copied();
            let mut done = false;
            if in_dq {
                match c {
                    None => return Err(ProtocolError::UnbalancedQuotes),
                    Some(b'\\') if i + 1 < n => {
                        needs_rewrite = true;
                        if line[i + 1] == b'x'
                            && i + 3 < n
                            && line[i + 2].is_ascii_hexdigit()
                            && line[i + 3].is_ascii_hexdigit()
                        {
                            i += 3;
                        } else {
                            i += 1;
                        }
                    }
                    Some(b'"') => {
                        if i + 1 < n && !is_c_space(line[i + 1]) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        range.end = i;
                        done = true;
                    }
                    Some(_) => {}
                }
            } else if in_sq {
                match c {
                    None => return Err(ProtocolError::UnbalancedQuotes),
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                        needs_rewrite = true;
                        i += 1;
                    }
                    Some(b'\'') => {
                        if i + 1 < n && !is_c_space(line[i + 1]) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        range.end = i;
                        done = true;
                    }
                    Some(_) => {}
                }
            } else {
                match c {
                    None | Some(b' ' | b'\n' | b'\r' | b'\t') => {
                        range.end = i;
                        done = true;
                    }
                    Some(q @ (b'"' | b'\'')) => {
                        if q == b'"' {
                            in_dq = true;
                        } else {
                            in_sq = true;
                        }
                        if i == begin {
                            range.start = i + 1;
                        } else {
                            needs_rewrite = true;
                        }
                    }
                    Some(_) => {}
                }
            }
            if i < n {
                i += 1;
            }
            if done {
                break;
            }
        }
        if args.len() < max_args {
            args.push(range);
        } else {
            too_many = true;
        }
    }
    if too_many {
        Err(ProtocolError::TooBigInlineRequest)
    } else if needs_rewrite {
        Err(ProtocolError::UnsupportedInlineQuoting)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::resp::parse_command;
    use crate::protocol::resp::test_support::{err, parse};
    use proptest::prelude::*;

    #[test]
    fn parses_inline() {
        let (p, args) = parse(b"  SUB\t EUR  \r\nPING\n");
        assert_eq!(p, Parsed::Command { consumed: 14 });
        assert_eq!(args, [b"SUB".to_vec(), b"EUR".to_vec()]);
        let (p, args) = parse(b"PING\n");
        assert_eq!(
            (p, args),
            (Parsed::Command { consumed: 5 }, vec![b"PING".to_vec()])
        );
        // Quoted arguments without escapes are plain ranges.
        let (p, args) = parse(b"SUBSCRIBE \"a b\" 'x y' \"\"\r\n");
        assert_eq!(p, Parsed::Command { consumed: 26 });
        assert_eq!(args, [&b"SUBSCRIBE"[..], b"a b", b"x y", b""]);
    }

    #[test]
    fn inline_quoting_needing_rewrites_is_refused() {
        // Live: `PING "a\x41\n"` -> `$3\r\naA\n\r\n`, `RPUSH k a"b c"` pushes
        // `ab c`, `RPUSH k 'it\'s'` pushes `it's`: not representable as
        // ranges, so refused.
        for input in [
            &b"PING \"a\\x41\\n\"\r\n"[..],
            b"RPUSH k a\"b c\"\r\n",
            b"RPUSH k 'it\\'s'\r\n",
            b"RPUSH k \"a\\\"b\"\r\n",
        ] {
            assert_eq!(
                parse(input).0,
                err(input.len(), ProtocolError::UnsupportedInlineQuoting),
                "{input:?}"
            );
        }
        // ...but an unbalanced line is still reported as Redis reports it.
        let input = b"RPUSH k \"a\\n\" \"b\r\n";
        assert_eq!(
            parse(input).0,
            err(input.len(), ProtocolError::UnbalancedQuotes)
        );
    }

    #[derive(Debug)]
    enum Inline {
        Tokens(&'static [&'static [u8]]),
        Unbalanced,
        Rewrite,
    }

    /// `RPUSH k <fragment>\r\n` sent inline to redis-server 7.0.15, then
    /// `LRANGE k 0 -1`: a sample of 6000 random fragments (quotes, escapes,
    /// `\r`, `\t`, `\v`, `\f`) checked differentially with zero mismatches.
    /// `Rewrite` = Redis accepted it but rewrote bytes (escapes or a quote
    /// inside a word), which this parser refuses.
    #[test]
    fn inline_tokenisation_recorded_against_redis() {
        use Inline::*;
        #[rustfmt::skip]
        let cases: &[(&[u8], Inline)] = &[
            (b"\"a b\" c", Tokens(&[b"a b", b"c"])),
            (b"'x y'", Tokens(&[b"x y"])),
            (b"\"\"", Tokens(&[b""])),
            (b"''", Tokens(&[b""])),
            (b"\"a\\\"b\"", Rewrite),
            (b"a\"b c\"", Rewrite),
            (b"'it\\'s'", Rewrite),
            (b"\"a\"b", Unbalanced),
            (b"x \"y", Unbalanced),
            (b"  SUB\t EUR  ", Tokens(&[b"SUB", b"EUR"])),
            (b"\x0bb\"bx\x0bxx\x0d\\\x0b\x09", Unbalanced),
            (b"\\F\x0b\x0ban", Tokens(&[b"\\F\x0b\x0ban"])),
            (b"\"n\x0b\x09Fb'", Unbalanced),
            (b"4a\\\x0d\x09\\na4\x09", Tokens(&[b"4a\\", b"\\na4"])),
            (b"xx4\x09'\x09\x0d\x09\x0bx\"a", Unbalanced),
            (b"\x0c4\x0db \x0d", Tokens(&[b"4", b"b"])),
            (b"\x0c\"bn'nn4\\4\x0c", Unbalanced),
            (b"\x09\"\"Fx\x0c4\\F\x0c", Unbalanced),
            (b"\x09n\x0b\\\\\x0d ", Tokens(&[b"n\x0b\\\\"])),
            (b"4n\x0b\x0dn", Tokens(&[b"4n\x0b", b"n"])),
            (b"bx\x0d4b", Tokens(&[b"bx", b"4b"])),
            (b" 4\x0c\\'xnaxa\"n", Unbalanced),
            (b"FF\\\x0d  4\x09a", Tokens(&[b"FF\\", b"4", b"a"])),
            (b"\x094\x0c4\x09\\4'\x0cF'x", Unbalanced),
            (b"\x0d4Fn", Tokens(&[b"4Fn"])),
            (b"\x0b\x0c\x0cn4\x0b", Tokens(&[b"n4\x0b"])),
            (b"\x09\\ax\x0c'F4", Unbalanced),
            (b"4\\x", Tokens(&[b"4\\x"])),
            (b"\\'a44", Unbalanced),
            (b"\x0bF'xFa\x0b\x09\x0d", Unbalanced),
            (b"4\x0b\x0c\x0c\"a\x0c\x0dbb\x0ca", Unbalanced),
            (b"a\x0b\x0b\"\x09\"b", Unbalanced),
            (b"F '\"b  \"4 \x0d\"", Unbalanced),
            (b"n\"xn'xxba\"", Rewrite),
            (b"'\\\x0b\x09\"b", Unbalanced),
            (b"n4\x09F", Tokens(&[b"n4", b"F"])),
            (b"\x0ca\x09a\\ ", Tokens(&[b"a", b"a\\"])),
            (b" xn4\x0d\\4\x0c\x09\x0d\x0b", Tokens(&[b"xn4", b"\\4\x0c"])),
            (b"4x\x094\x0da\\\x0dF\x0b'", Unbalanced),
            (b"\x0d\\an\" \x09a\"b", Unbalanced),
            (b"n \\F", Tokens(&[b"n", b"\\F"])),
            (b" a4\x0c", Tokens(&[b"a4\x0c"])),
            (b"\x0c\x09Fx \x0c\x0c\x0c\x0b", Tokens(&[b"Fx"])),
            (b"F4a\\\x09'b\x09F\x0d\\", Unbalanced),
            (b"\x09xb\x0d\\\"4xa", Unbalanced),
            (b"F\x0c\\\"a", Unbalanced),
            (b"\x0bF\x0b '", Unbalanced),
            (b"\x09\"\x0db\x0c\\", Unbalanced),
            (b"'\x0c\x0d4x\x0b4\x09", Unbalanced),
            (b"\"\x0b'", Unbalanced),
            (b"4\x0c\"'''b\"\x09", Rewrite),
            (b"\x0bnx F4\x0bb'", Unbalanced),
            (b"b\\\x0c\x0b \x0c", Tokens(&[b"b\\\x0c\x0b"])),
            (b"F\x0b\\bF4\x09Fb", Tokens(&[b"F\x0b\\bF4", b"Fb"])),
            (b"'\"F4", Unbalanced),
            (b"b\x0ba\x0c", Tokens(&[b"b\x0ba\x0c"])),
            (b"aF\x0da", Tokens(&[b"aF", b"a"])),
            (b"a\x09\x09\x0bF\\ bx \x0d\x09", Tokens(&[b"a", b"F\\", b"bx"])),
            (b"\x0b4\x0c\"4\"", Rewrite),
            (b"\x0bF\x0b", Tokens(&[b"F\x0b"])),
            (b"a' '", Rewrite),
            (b"\x09a\x0b", Tokens(&[b"a\x0b"])),
            (b"\x0b'xx\x0c\x0c b4\x0b\x0b'", Tokens(&[b"xx\x0c\x0c b4\x0b\x0b"])),
            (b"\x0cF\x0b\x0d4", Tokens(&[b"F\x0b", b"4"])),
            (b" Fb\x09xa", Tokens(&[b"Fb", b"xa"])),
            (b"\x0dnbx\x0c\x09\x0c\\\x0b\\", Tokens(&[b"nbx\x0c", b"\\\x0b\\"])),
            (b"b\\F", Tokens(&[b"b\\F"])),
            (b"\\b\x0d\"\"\x09\\n", Tokens(&[b"\\b", b"", b"\\n"])),
            (b"a\x094xFaa\x0d", Tokens(&[b"a", b"4xFaa"])),
            (b"\x09\x0c\"\x09 \" 4\x09", Tokens(&[b"\x09 ", b"4"])),
            (b"\"F\x0b\"", Tokens(&[b"F\x0b"])),
            (b"F\\\x09", Tokens(&[b"F\\"])),
            (b"\x0bb\x0ba", Tokens(&[b"b\x0ba"])),
            (b"nn\x0cn4\x09xF\x0c", Tokens(&[b"nn\x0cn4", b"xF\x0c"])),
            (b"\x0cFFnn", Tokens(&[b"FFnn"])),
            (b"4bnF", Tokens(&[b"4bnF"])),
            (b"\x0dn\"F\"\x09", Rewrite),
            (b"\x0dnn\x0c", Tokens(&[b"nn\x0c"])),
            (b"\x0c\x0da", Tokens(&[b"a"])),
            (b"4  \x0b nx", Tokens(&[b"4", b"nx"])),
            (b"bn\"nFn\x0bb\" ", Rewrite),
            (b"\\\"''\"", Rewrite),
            (b"F\"x\" 4xF 4", Rewrite),
            (b"\\\x0c\x0dnb\"\x0d\" x", Rewrite),
            (b"a4\x0cF4 \\\"\"", Rewrite),
            (b"Fa'bbnb\"'\x09", Rewrite),
            (b"4\"4\"", Rewrite),
            (b"\\'\"\x0b\x0c'", Rewrite),
            (b"\x09\x0baa\x0c\"x\"", Rewrite),
            (b"4'\x09\x09'\x0d", Rewrite),
        ];
        let mut args = Vec::new();
        for (frag, want) in cases {
            let mut req = b"RPUSH k ".to_vec();
            req.extend_from_slice(frag);
            req.extend_from_slice(b"\r\n");
            let got = parse_command(&req, &mut args, &Limits::default());
            let ok = match (want, got) {
                (Tokens(t), Parsed::Command { consumed }) => {
                    consumed == req.len()
                        && args.len() == t.len() + 2
                        && args[2..]
                            .iter()
                            .zip(t.iter())
                            .all(|(r, t)| &req[r.clone()] == *t)
                }
                (Unbalanced, Parsed::Error { error, .. }) => {
                    error == ProtocolError::UnbalancedQuotes
                }
                (Rewrite, Parsed::Error { error, .. }) => {
                    error == ProtocolError::UnsupportedInlineQuoting
                }
                _ => false,
            };
            assert!(ok, "fragment {frag:?}: want {want:?}, got {got:?}");
        }
    }

    // ----- properties ----------------------------------------------------------

    /// Allocating transcription of Redis's `sdssplitargs()` (escapes decoded),
    /// with `None` for "unbalanced quotes".
    fn sdssplitargs(line: &[u8]) -> Option<Vec<Vec<u8>>> {
        let n = line.len();
        let at = |i: usize| line.get(i).copied();
        let hex = |b: u8| (b as char).to_digit(16).unwrap() as u8;
        let mut p = 0;
        let mut out = Vec::new();
        loop {
            while p < n && is_c_space(line[p]) {
                p += 1;
            }
            if p == n {
                return Some(out);
            }
            let (mut inq, mut insq, mut done) = (false, false, false);
            let mut cur = Vec::new();
            while !done {
                let c = at(p);
                if inq {
                    if c == Some(b'\\')
                        && at(p + 1) == Some(b'x')
                        && at(p + 2).is_some_and(|b| b.is_ascii_hexdigit())
                        && at(p + 3).is_some_and(|b| b.is_ascii_hexdigit())
                    {
                        cur.push(hex(line[p + 2]) * 16 + hex(line[p + 3]));
                        p += 3;
                    } else if c == Some(b'\\') && p + 1 < n {
                        p += 1;
                        cur.push(match line[p] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            o => o,
                        });
                    } else if c == Some(b'"') {
                        if at(p + 1).is_some_and(|b| !is_c_space(b)) {
                            return None;
                        }
                        done = true;
                    } else if let Some(c) = c {
                        cur.push(c);
                    } else {
                        return None;
                    }
                } else if insq {
                    if c == Some(b'\\') && at(p + 1) == Some(b'\'') {
                        p += 1;
                        cur.push(b'\'');
                    } else if c == Some(b'\'') {
                        if at(p + 1).is_some_and(|b| !is_c_space(b)) {
                            return None;
                        }
                        done = true;
                    } else if let Some(c) = c {
                        cur.push(c);
                    } else {
                        return None;
                    }
                } else {
                    match c {
                        None | Some(b' ' | b'\n' | b'\r' | b'\t') => done = true,
                        Some(b'"') => inq = true,
                        Some(b'\'') => insq = true,
                        Some(c) => cur.push(c),
                    }
                }
                if p < n {
                    p += 1;
                }
            }
            out.push(cur);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn inline_split_agrees_with_sdssplitargs(
            line in prop::collection::vec(prop::sample::select(b"ab \t\"'\\x4F\r\x0b\x0c".to_vec()), 0..16),
        ) {
            let mut input = b"x ".to_vec();
            input.extend_from_slice(&line);
            input.push(b'\n');
            let mut args = Vec::new();
            let got = parse_command(&input, &mut args, &Limits::default());
            let end = input.len() - 1 - usize::from(input[input.len() - 2] == b'\r');
            match (sdssplitargs(&input[..end]), got) {
                (Some(want), Parsed::Command { consumed }) => {
                    prop_assert_eq!(consumed, input.len());
                    let have: Vec<Vec<u8>> = args.iter().map(|r| input[r.clone()].to_vec()).collect();
                    prop_assert_eq!(have, want);
                }
                (Some(_), Parsed::Error { error: ProtocolError::UnsupportedInlineQuoting, .. }) => {}
                (None, Parsed::Error { error: ProtocolError::UnbalancedQuotes, consumed }) => {
                    prop_assert_eq!(consumed, input.len());
                }
                (want, got) => prop_assert!(false, "redis {:?} vs ours {:?}", want, got),
            }
        }
    }
}
