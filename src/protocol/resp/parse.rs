//! The request parser: one command at a time from the front of a
//! subscriber's input buffer ([`parse_command`]).
//!
//! Incremental, zero-copy (arguments are returned as byte ranges into the
//! caller's buffer) and allocation-free in steady state. Both request forms
//! Redis accepts are supported: multibulk (`*N\r\n$len\r\n...\r\n`,
//! framed here) and inline (a text line, framed and split in
//! [`super::inline`]). The framing rules are those of Redis 7.0's
//! `processMultibulkBuffer()` / `processInlineBuffer()`, including their
//! quirks (a header line ends at the first `\r` and the byte after it is
//! skipped unchecked; the two bytes after a bulk payload are skipped
//! unchecked). [`string2ll`] is how Redis reads every integer: the `*N` and
//! `$N` counts here, and integer arguments in the publisher.
//!
//! # Protocol errors and resynchronisation
//!
//! Redis replies `-ERR Protocol error: ...` and then closes the connection.
//! tickfan instead keeps the connection: [`Parsed::Error::consumed`] is the
//! number of bytes to discard so that parsing can resume on the next line,
//! namely everything up to and including the first `\n` at or after the
//! start of the offending line (or everything buffered if there is no `\n`
//! yet). Bytes belonging to the rest of a broken command are then parsed as
//! further (usually inline) commands and typically earn their own error
//! replies; callers that prefer Redis's behaviour can simply close the
//! connection after replying. The error itself, with Redis's text, is a
//! [`ProtocolError`].
//!
//! # Deliberate deviations from Redis
//!
//! * Limits are configurable ([`Limits`]) and much smaller than Redis's
//!   (1024 arguments and 64 KiB bulks instead of `INT_MAX` and 512 MiB). A
//!   multibulk count above `max_args` is reported as Redis reports counts
//!   above `INT_MAX`, a bulk above `max_bulk_len` like one above
//!   `proto-max-bulk-len`; an inline request with more than `max_args`
//!   arguments is a "too big inline request".
//! * Length checks are deterministic: an inline line or header line longer
//!   than `max_inline_len` is rejected even if its terminator is already
//!   buffered (Redis only checks when the terminator has not arrived yet).
//! * A NUL byte is an ordinary byte here; Redis's C-string scanning stalls
//!   on it in inline and header lines.
//! * Inline arguments that Redis would rewrite (escapes, mid-argument
//!   quotes) are refused; see [`super::inline`].

use std::ops::Range;

use super::errors::ProtocolError;
use super::inline::parse_inline;

/// Default [`Limits::max_args`].
pub(crate) const DEFAULT_MAX_ARGS: usize = 1024;
/// Default [`Limits::max_bulk_len`] (64 KiB).
pub(crate) const DEFAULT_MAX_BULK_LEN: usize = 64 * 1024;
/// Default [`Limits::max_inline_len`] (64 KiB, Redis's `PROTO_INLINE_MAX_SIZE`).
pub(crate) const DEFAULT_MAX_INLINE_LEN: usize = 64 * 1024;

/// Per-connection bounds enforced by [`parse_command`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum number of arguments (command name included) in one command.
    pub max_args: usize,
    /// Maximum length of one multibulk argument.
    pub max_bulk_len: usize,
    /// Maximum length of an inline request line, and of a `*N` / `$N` header
    /// line, excluding its final `\n`.
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_args: DEFAULT_MAX_ARGS,
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_inline_len: DEFAULT_MAX_INLINE_LEN,
        }
    }
}

/// Outcome of [`parse_command`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A complete command occupying `input[..consumed]`; its arguments are in
    /// `args`. Zero arguments (empty inline line, `*0`, `*-1`) means "nothing
    /// to execute": Redis silently skips such requests.
    Command {
        /// Bytes to remove from the front of the input buffer.
        consumed: usize,
    },
    /// `input` is a strict prefix of a command: read more and call again
    /// with the grown buffer (nothing should be discarded).
    Incomplete,
    /// Malformed request: reply with [`ProtocolError::append_reply`], then
    /// discard `input[..consumed]` and carry on (see the module docs).
    /// `consumed` is always at least 1.
    Error {
        /// Bytes to discard to resynchronise on the next line.
        consumed: usize,
        /// What was wrong.
        error: ProtocolError,
    },
}

/// Parses one command from the front of `input`.
///
/// On [`Parsed::Command`], `args` holds the byte range of each argument
/// within `input` (command name first). `args` is cleared on entry and
/// reused, so a connection that keeps one `Vec` allocates nothing once it
/// has seen its largest command; `args.len()` never exceeds
/// `limits.max_args`. On the other outcomes `args` is left empty.
///
/// Never panics and never looks past `input`; every strict prefix of a
/// well-formed command yields [`Parsed::Incomplete`]. Each call re-scans the
/// command from its first byte (there is no hidden state), which is cheap
/// for the short commands subscribers send.
pub fn parse_command(input: &[u8], args: &mut Vec<Range<usize>>, limits: &Limits) -> Parsed {
    args.clear();
    let parsed = match input.first() {
        None => Parsed::Incomplete,
        Some(b'*') => parse_multibulk(input, args, limits),
        Some(_) => parse_inline(input, args, limits),
    };
    if !matches!(parsed, Parsed::Command { .. }) {
        args.clear();
    }
    parsed
}

/// Result of looking for the `\r` that ends a `*`/`$` header line.
enum HeaderLine {
    /// Index of the `\r`; at least one more byte follows it.
    Cr(usize),
    Incomplete,
    TooBig,
}

/// Redis: `strchr(line, '\r')`, "too big" once more than
/// `PROTO_INLINE_MAX_SIZE` bytes are buffered without one, and incomplete
/// until the byte after the `\r` (assumed `\n`, never checked) has arrived.
fn header_line(input: &[u8], start: usize, limits: &Limits) -> HeaderLine {
    let avail = input.len() - start;
    let window = avail.min(limits.max_inline_len.saturating_add(1));
    match memchr::memchr(b'\r', &input[start..start + window]) {
        Some(i) if i + 1 < avail => HeaderLine::Cr(start + i),
        Some(_) => HeaderLine::Incomplete,
        None if avail > limits.max_inline_len => HeaderLine::TooBig,
        None => HeaderLine::Incomplete,
    }
}

/// Bytes to discard after an error on the line starting at `line_start`:
/// through the next `\n`, or everything if none is buffered yet.
fn resync(input: &[u8], line_start: usize) -> usize {
    match memchr::memchr(b'\n', &input[line_start..]) {
        Some(i) => line_start + i + 1,
        None => input.len(),
    }
}

/// A [`Parsed::Error`] for `error` on the line starting at `line_start`.
pub(super) fn error_at(input: &[u8], line_start: usize, error: ProtocolError) -> Parsed {
    Parsed::Error {
        consumed: resync(input, line_start),
        error,
    }
}

fn parse_multibulk(input: &[u8], args: &mut Vec<Range<usize>>, limits: &Limits) -> Parsed {
    let cr = match header_line(input, 0, limits) {
        HeaderLine::Cr(cr) => cr,
        HeaderLine::Incomplete => return Parsed::Incomplete,
        HeaderLine::TooBig => return error_at(input, 0, ProtocolError::TooBigMbulkCountString),
    };
    let count = match string2ll(&input[1..cr]) {
        Some(n) if n <= i64::from(i32::MAX) => n,
        _ => return error_at(input, 0, ProtocolError::InvalidMultibulkLength),
    };
    let mut pos = cr + 2;
    if count <= 0 {
        return Parsed::Command { consumed: pos };
    }
    let count = count as usize;
    if count > limits.max_args {
        return error_at(input, 0, ProtocolError::InvalidMultibulkLength);
    }
    args.reserve_exact(count);
    for _ in 0..count {
        let line = pos;
        let cr = match header_line(input, line, limits) {
            HeaderLine::Cr(cr) => cr,
            HeaderLine::Incomplete => return Parsed::Incomplete,
            HeaderLine::TooBig => {
                return error_at(input, line, ProtocolError::TooBigBulkCountString)
            }
        };
        if input[line] != b'$' {
            return error_at(input, line, ProtocolError::ExpectedDollar(input[line]));
        }
        let len = match string2ll(&input[line + 1..cr]) {
            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n as usize,
            _ => return error_at(input, line, ProtocolError::InvalidBulkLength),
        };
        let data = cr + 2;
        // Payload plus the two trailing bytes Redis skips without looking.
        if input.len() - data < len.saturating_add(2) {
            return Parsed::Incomplete;
        }
        args.push(data..data + len);
        pos = data + len + 2;
    }
    Parsed::Command { consumed: pos }
}

/// Redis's `string2ll()`: optional `-`, no `+`, no leading zeros (except
/// `0` itself), no spaces, must fit in an `i64`. (How Redis reads every
/// integer argument: `SELECT`, `HELLO`'s version.)
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > 1 << 63 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else {
        i64::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::resp::test_support::{err, multibulk, parse, parse_with, reply};
    use proptest::prelude::*;

    // ----- well-formed input ---------------------------------------------------

    #[test]
    fn parses_multibulk() {
        let input = b"*2\r\n$9\r\nSUBSCRIBE\r\n$6\r\nEURUSD\r\nrest";
        let (p, args) = parse(input);
        assert_eq!(p, Parsed::Command { consumed: 31 });
        assert_eq!(args, [b"SUBSCRIBE".to_vec(), b"EURUSD".to_vec()]);
        let (p, args) = parse(b"*1\r\n$0\r\n\r\n");
        assert_eq!(p, Parsed::Command { consumed: 10 });
        assert_eq!(args, [Vec::<u8>::new()]);
    }

    #[test]
    fn empty_requests_have_zero_args() {
        // Live: `\r\n\nPING\n` -> only `+PONG\r\n`; `*-5\r\nPING\r\n` and
        // `*0\r\nPING\r\n` -> only `+PONG\r\n`.
        for (input, consumed) in [
            (&b"\r\n"[..], 2),
            (b"\n", 1),
            (b"   \t\r\n", 6),
            (b"*0\r\n", 4),
            (b"*-1\r\n", 5),
            (b"*-5\r\n", 5),
        ] {
            assert_eq!(
                parse(input),
                (Parsed::Command { consumed }, vec![]),
                "{input:?}"
            );
        }
    }

    #[test]
    fn redis_framing_quirks() {
        // Live: `*1\rx$4\rxPING\rx` -> `+PONG\r\n` (byte after `\r` unchecked).
        let (p, args) = parse(b"*1\rx$4\rxPING\rx");
        assert_eq!(
            (p, args),
            (Parsed::Command { consumed: 14 }, vec![b"PING".to_vec()])
        );
        // Live: `*1\r\n$4\r\nPINGxxPING\r\n` -> `+PONG\r\n+PONG\r\n`.
        let input = b"*1\r\n$4\r\nPINGxxPING\r\n";
        let (p, args) = parse(input);
        assert_eq!(
            (p, args),
            (Parsed::Command { consumed: 14 }, vec![b"PING".to_vec()])
        );
        let (p, args) = parse(&input[14..]);
        assert_eq!(
            (p, args),
            (Parsed::Command { consumed: 6 }, vec![b"PING".to_vec()])
        );
    }

    #[test]
    fn incomplete_inputs() {
        for input in [
            &b""[..],
            b"*",
            b"*1",
            b"*1\r",
            b"*1\r\n",
            b"*1\r\n$",
            b"*1\r\n$4\r",
            b"*1\r\n$4\r\nPI",
            b"*1\r\n$4\r\nPING",
            b"*1\r\n$4\r\nPING\r",
            b"PING",
            b"PING\r",
            b"*1\r\nxx", // the '$' check waits for the whole header line
        ] {
            assert_eq!(parse(input), (Parsed::Incomplete, vec![]), "{input:?}");
        }
    }

    // ----- errors, with the replies captured from redis-server -----------------

    #[test]
    fn protocol_errors_match_redis() {
        // (request, our verdict, reply redis-server 7.0.15 sent before closing)
        let cases: &[(&[u8], Parsed, &[u8])] = &[
            (
                b"*abc\r\n",
                err(6, ProtocolError::InvalidMultibulkLength),
                b"-ERR Protocol error: invalid multibulk length\r\n",
            ),
            (
                b"*3000000000\r\n",
                err(13, ProtocolError::InvalidMultibulkLength),
                b"-ERR Protocol error: invalid multibulk length\r\n",
            ),
            (
                b"*01\r\n",
                err(5, ProtocolError::InvalidMultibulkLength),
                b"-ERR Protocol error: invalid multibulk length\r\n",
            ),
            (
                b"*1\r\n$x\r\n",
                err(8, ProtocolError::InvalidBulkLength),
                b"-ERR Protocol error: invalid bulk length\r\n",
            ),
            (
                b"*1\r\n$-1\r\n",
                err(9, ProtocolError::InvalidBulkLength),
                b"-ERR Protocol error: invalid bulk length\r\n",
            ),
            (
                b"*1\r\n$1000000000\r\n",
                err(17, ProtocolError::InvalidBulkLength),
                b"-ERR Protocol error: invalid bulk length\r\n",
            ),
            (
                b"*1\r\nxx\r\n",
                err(8, ProtocolError::ExpectedDollar(b'x')),
                b"-ERR Protocol error: expected '$', got 'x'\r\n",
            ),
            (
                b"*1\r\n\rx\r\n",
                err(8, ProtocolError::ExpectedDollar(b'\r')),
                b"-ERR Protocol error: expected '$', got ' '\r\n",
            ),
            (
                b"PING \"a\r\n",
                err(9, ProtocolError::UnbalancedQuotes),
                b"-ERR Protocol error: unbalanced quotes in request\r\n",
            ),
            (
                b"PING \"a\"b\r\n",
                err(11, ProtocolError::UnbalancedQuotes),
                b"-ERR Protocol error: unbalanced quotes in request\r\n",
            ),
        ];
        for &(input, want, redis_reply) in cases {
            let (got, args) = parse(input);
            assert_eq!(got, want, "{input:?}");
            assert!(args.is_empty());
            let Parsed::Error { error, .. } = got else {
                unreachable!()
            };
            assert_eq!(reply(|o| error.append_reply(o)), redis_reply, "{input:?}");
        }
    }

    #[test]
    fn too_big_errors_match_redis() {
        // Live, default 64 KiB limit: 65537 bytes without a terminator are
        // rejected, 65536 are still waited for.
        let a = vec![b'a'; 65_537];
        assert_eq!(parse(&a).0, err(65_537, ProtocolError::TooBigInlineRequest));
        assert_eq!(parse(&a[..65_536]).0, Parsed::Incomplete);
        assert_eq!(
            reply(|o| ProtocolError::TooBigInlineRequest.append_reply(o)),
            b"-ERR Protocol error: too big inline request\r\n"
        );

        let mut m = b"*".to_vec();
        m.extend(std::iter::repeat_n(b'1', 65_536));
        assert_eq!(
            parse(&m).0,
            err(65_537, ProtocolError::TooBigMbulkCountString)
        );
        assert_eq!(parse(&m[..65_536]).0, Parsed::Incomplete);
        assert_eq!(
            reply(|o| ProtocolError::TooBigMbulkCountString.append_reply(o)),
            b"-ERR Protocol error: too big mbulk count string\r\n"
        );

        let mut b = b"*1\r\n$".to_vec();
        b.extend(std::iter::repeat_n(b'1', 65_536));
        assert_eq!(
            parse(&b).0,
            err(b.len(), ProtocolError::TooBigBulkCountString)
        );
        let mut x = b"*1\r\n".to_vec();
        x.extend(std::iter::repeat_n(b'x', 65_537));
        assert_eq!(
            parse(&x).0,
            err(x.len(), ProtocolError::TooBigBulkCountString)
        );
        assert_eq!(
            reply(|o| ProtocolError::TooBigBulkCountString.append_reply(o)),
            b"-ERR Protocol error: too big bulk count string\r\n"
        );

        // Deterministic: an over-long line is rejected even when complete,
        // and the whole line is discarded.
        let mut line = vec![b'a'; 70_000];
        line.extend_from_slice(b"\r\nPING\r\n");
        assert_eq!(
            parse(&line).0,
            err(70_002, ProtocolError::TooBigInlineRequest)
        );
    }

    #[test]
    fn limits_are_enforced() {
        let limits = Limits {
            max_args: 2,
            max_bulk_len: 4,
            max_inline_len: 16,
        };
        let ok = parse_with(b"*2\r\n$4\r\nabcd\r\n$0\r\n\r\n", &limits);
        assert_eq!(ok.0, Parsed::Command { consumed: 20 });
        let (p, _) = parse_with(b"*3\r\n$1\r\na\r\n", &limits);
        assert_eq!(p, err(4, ProtocolError::InvalidMultibulkLength));
        let (p, _) = parse_with(b"*1\r\n$5\r\nabcde\r\n", &limits);
        assert_eq!(p, err(8, ProtocolError::InvalidBulkLength));
        let (p, _) = parse_with(b"a b c\r\n", &limits);
        assert_eq!(p, err(7, ProtocolError::TooBigInlineRequest));
        let (p, _) = parse_with(b"0123456789abcdefg", &limits);
        assert_eq!(p, err(17, ProtocolError::TooBigInlineRequest));
        let (p, _) = parse_with(b"0123456789abcdef", &limits);
        assert_eq!(p, Parsed::Incomplete);
        let (p, args) = parse_with(b"0123456789abcde\r\n", &limits);
        assert_eq!((p, args.len()), (Parsed::Command { consumed: 17 }, 1));
    }

    #[test]
    fn resynchronises_after_errors() {
        let input = b"*1\r\n$x\r\n*1\r\n$4\r\nPING\r\n";
        let (p, _) = parse(input);
        assert_eq!(p, err(8, ProtocolError::InvalidBulkLength));
        let (p, args) = parse(&input[8..]);
        assert_eq!(
            (p, args),
            (Parsed::Command { consumed: 14 }, vec![b"PING".to_vec()])
        );
        // The error line of a half-parsed command is discarded with the
        // valid lines before it.
        let input = b"*2\r\n$3\r\nfoo\r\n!3\r\nbar\r\n";
        assert_eq!(parse(input).0, err(17, ProtocolError::ExpectedDollar(b'!')));
        // No newline buffered at all: everything goes.
        assert_eq!(
            parse(b"*1\r\n$-5\rX").0,
            err(9, ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn steady_state_parsing_does_not_allocate() {
        let input = multibulk(&[b"SUBSCRIBE", b"EURUSD", b"GBPUSD"]);
        let mut args = Vec::new();
        let limits = Limits::default();
        parse_command(&input, &mut args, &limits);
        let (ptr, cap) = (args.as_ptr(), args.capacity());
        for _ in 0..100 {
            assert!(matches!(
                parse_command(&input, &mut args, &limits),
                Parsed::Command { .. }
            ));
            assert_eq!((args.as_ptr(), args.capacity()), (ptr, cap));
        }
        assert!(cap <= limits.max_args);
    }

    #[test]
    fn string2ll_matches_redis() {
        for (s, v) in [
            (&b"0"[..], Some(0)),
            (b"1", Some(1)),
            (b"-1", Some(-1)),
            (b"99", Some(99)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-9223372036854775809", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"01", None),
            (b"-0", None),
            (b"-", None),
            (b"", None),
        ] {
            assert_eq!(string2ll(s), v, "{s:?}");
        }
    }

    // ----- properties ----------------------------------------------------------

    /// An argument that is safe as an unquoted inline word.
    fn word() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(b"abcXYZ019.:_-|$*\\".to_vec()), 1..8)
    }

    /// A command as (wire bytes, expected arguments).
    fn command() -> impl Strategy<Value = (Vec<u8>, Vec<Vec<u8>>)> {
        let bulk_args = prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 1..6)
            .prop_map(|args| {
                let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                (multibulk(&refs), args)
            });
        let inline = (
            prop::collection::vec(
                (
                    word(),
                    any::<bool>(),
                    prop::sample::select(vec![" ", "\t", "  "]),
                ),
                1..5,
            ),
            any::<bool>(),
        )
            .prop_filter_map("first word must not start with '*'", |(words, crlf)| {
                if words[0].0[0] == b'*' {
                    return None;
                }
                let mut wire = Vec::new();
                let mut args = Vec::new();
                for (i, (w, quote, sep)) in words.into_iter().enumerate() {
                    if i > 0 {
                        wire.extend_from_slice(sep.as_bytes());
                    }
                    // Quoted words may contain blanks; no escapes needed.
                    if quote && i > 0 {
                        let w: Vec<u8> = w
                            .into_iter()
                            .map(|b| if b == b'\\' { b'_' } else { b })
                            .collect();
                        wire.push(b'"');
                        wire.extend_from_slice(&w);
                        wire.extend_from_slice(b" x");
                        wire.push(b'"');
                        let mut a = w.clone();
                        a.extend_from_slice(b" x");
                        args.push(a);
                    } else {
                        wire.extend_from_slice(&w);
                        args.push(w);
                    }
                }
                wire.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
                Some((wire, args))
            });
        prop_oneof![3 => bulk_args, 1 => inline]
    }

    fn small_limits() -> impl Strategy<Value = Limits> {
        (0usize..6, 0usize..40, 0usize..40).prop_map(|(a, b, i)| Limits {
            max_args: a,
            max_bulk_len: b,
            max_inline_len: i,
        })
    }

    fn check_invariants(input: &[u8], limits: &Limits) -> Result<(), TestCaseError> {
        let mut args = Vec::new();
        match parse_command(input, &mut args, limits) {
            Parsed::Command { consumed } => {
                prop_assert!(consumed >= 1 && consumed <= input.len());
                prop_assert!(args.len() <= limits.max_args);
                for r in &args {
                    prop_assert!(r.start <= r.end && r.end <= consumed);
                }
            }
            Parsed::Incomplete => prop_assert!(args.is_empty()),
            Parsed::Error { consumed, .. } => {
                prop_assert!(args.is_empty());
                prop_assert!(consumed >= 1 && consumed <= input.len());
                prop_assert!(consumed == input.len() || input[consumed - 1] == b'\n');
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn never_panics_on_arbitrary_bytes(
            input in prop::collection::vec(any::<u8>(), 0..64),
            limits in small_limits(),
        ) {
            check_invariants(&input, &limits)?;
            check_invariants(&input, &Limits::default())?;
        }

        #[test]
        fn never_panics_on_protocol_like_bytes(
            input in prop::collection::vec(prop::sample::select(b"*$-019\r\n \"'\\x".to_vec()), 0..48),
            limits in small_limits(),
        ) {
            check_invariants(&input, &limits)?;
            check_invariants(&input, &Limits::default())?;
        }

        #[test]
        fn prefixes_are_incomplete_and_full_parses((wire, want) in command()) {
            let limits = Limits::default();
            let mut args = Vec::new();
            for cut in 0..wire.len() {
                prop_assert_eq!(
                    parse_command(&wire[..cut], &mut args, &limits),
                    Parsed::Incomplete,
                    "prefix {:?}", &wire[..cut]
                );
            }
            prop_assert_eq!(
                parse_command(&wire, &mut args, &limits),
                Parsed::Command { consumed: wire.len() }
            );
            let got: Vec<Vec<u8>> = args.iter().map(|r| wire[r.clone()].to_vec()).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn concatenated_commands_parse_back_one_by_one(
            cmds in prop::collection::vec(command(), 1..6),
            trailing in 0usize..4,
        ) {
            let mut stream: Vec<u8> = cmds.iter().flat_map(|(w, _)| w.clone()).collect();
            // A partial extra command at the end must stay Incomplete.
            let extra = multibulk(&[b"PING", b"tail"]);
            stream.extend_from_slice(&extra[..trailing]);
            let mut args = Vec::new();
            let mut pos = 0;
            for (wire, want) in &cmds {
                match parse_command(&stream[pos..], &mut args, &Limits::default()) {
                    Parsed::Command { consumed } => {
                        prop_assert_eq!(consumed, wire.len());
                        let got: Vec<Vec<u8>> =
                            args.iter().map(|r| stream[pos..][r.clone()].to_vec()).collect();
                        prop_assert_eq!(&got, want);
                        pos += consumed;
                    }
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            prop_assert_eq!(
                parse_command(&stream[pos..], &mut args, &Limits::default()),
                Parsed::Incomplete
            );
        }
    }
}
