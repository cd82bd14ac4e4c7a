//! Redis 7.0's error replies, byte for byte: what a client sees when its
//! request is malformed or refused.
//!
//! * [`ProtocolError`]: the parser's verdict on a malformed request, with
//!   Redis's `-ERR Protocol error: ...` wording
//!   ([`ProtocolError::append_reply`]).
//! * Command rejections, worded as Redis's `processCommand()` words them:
//!   unknown command ([`append_unknown_command`], with Redis's 128-byte
//!   cuts), unknown subcommand, wrong arity, and the refusal of a valid
//!   command in the RESP2 subscribed context
//!   ([`append_subscribed_context_rejection`], which resolves the command
//!   against Redis's table in [`super::commands`]).
//!
//! Every text was captured from a live `redis-server` 7.0.15; the captured
//! bytes are the expected values of the tests below.

use std::fmt;
use std::ops::Range;

use super::commands::{check_redis_command, eq_ignore_case, CommandCheck};
use super::encode::{extend_sanitized, sanitize, RespBuf, CRLF};

/// A malformed request. [`fmt::Display`] and [`ProtocolError::append_reply`]
/// give Redis 7.0's exact wording (all but the last variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    /// `Protocol error: invalid multibulk length` (bad `*N`, or `N` above
    /// [`Limits::max_args`](super::Limits::max_args)).
    InvalidMultibulkLength,
    /// `Protocol error: invalid bulk length` (bad or negative `$N`, or `N`
    /// above [`Limits::max_bulk_len`](super::Limits::max_bulk_len)).
    InvalidBulkLength,
    /// `Protocol error: expected '$', got 'x'` with the offending byte.
    ExpectedDollar(u8),
    /// `Protocol error: too big mbulk count string` (no `\r` within
    /// [`Limits::max_inline_len`](super::Limits::max_inline_len) bytes of a
    /// `*` header).
    TooBigMbulkCountString,
    /// `Protocol error: too big bulk count string` (same for a `$` header).
    TooBigBulkCountString,
    /// `Protocol error: too big inline request` (inline line longer than
    /// [`Limits::max_inline_len`](super::Limits::max_inline_len), or more
    /// than [`Limits::max_args`](super::Limits::max_args) words).
    TooBigInlineRequest,
    /// `Protocol error: unbalanced quotes in request`.
    UnbalancedQuotes,
    /// tickfan only: an inline argument uses escapes inside quotes or a quote
    /// in mid-argument, which would need rewriting (see `inline.rs`).
    UnsupportedInlineQuoting,
}

impl ProtocolError {
    /// Appends the error reply Redis sends for this error, e.g.
    /// `-ERR Protocol error: invalid bulk length\r\n`.
    pub fn append_reply(&self, out: &mut impl RespBuf) {
        out.put_slice(b"-ERR ");
        match *self {
            ProtocolError::ExpectedDollar(got) => {
                out.put_slice(b"Protocol error: expected '$', got '");
                // Redis formats with `%c` into a C string and then maps CR/LF
                // to spaces: a NUL therefore ends the message right here.
                if got != 0 {
                    out.put_u8(sanitize(got));
                    out.put_u8(b'\'');
                }
            }
            other => out.put_slice(other.static_text().as_bytes()),
        }
        out.put_slice(b"\r\n");
    }

    fn static_text(self) -> &'static str {
        match self {
            ProtocolError::InvalidMultibulkLength => "Protocol error: invalid multibulk length",
            ProtocolError::InvalidBulkLength => "Protocol error: invalid bulk length",
            ProtocolError::ExpectedDollar(_) => "Protocol error: expected '$'",
            ProtocolError::TooBigMbulkCountString => "Protocol error: too big mbulk count string",
            ProtocolError::TooBigBulkCountString => "Protocol error: too big bulk count string",
            ProtocolError::TooBigInlineRequest => "Protocol error: too big inline request",
            ProtocolError::UnbalancedQuotes => "Protocol error: unbalanced quotes in request",
            ProtocolError::UnsupportedInlineQuoting => {
                "Protocol error: escapes and mid-argument quotes are not supported in inline \
                 requests, use the multibulk protocol"
            }
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ProtocolError::ExpectedDollar(got) => write!(
                f,
                "Protocol error: expected '$', got '{}'",
                std::ascii::escape_default(got)
            ),
            other => f.write_str(other.static_text()),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Appends `s` the way C's `%.<max>s` prints it (at most `max` bytes,
/// stopping at a NUL), with CR/LF mapped to spaces as Redis's
/// `rejectCommandFormat()` does. Returns the number of bytes written.
fn push_c_str(out: &mut impl RespBuf, s: &[u8], max: usize) -> usize {
    let s = &s[..s.len().min(max)];
    let s = match memchr::memchr(0, s) {
        Some(nul) => &s[..nul],
        None => s,
    };
    extend_sanitized(out, s);
    s.len()
}

/// Appends Redis 7.0's unknown-command error:
/// `-ERR unknown command '<name>', with args beginning with: '<a1>' '<a2>' \r\n`.
/// Like Redis, the name is cut to 128 bytes, the quoted arguments stop once
/// 128 bytes of them have been written (the last one cut to fit), a NUL ends
/// any string early, and CR/LF become spaces. `args` are the arguments after
/// the name.
pub(crate) fn append_unknown_command<'a, I>(out: &mut impl RespBuf, name: &[u8], args: I)
where
    I: IntoIterator<Item = &'a [u8]>,
{
    out.put_slice(b"-ERR unknown command '");
    push_c_str(out, name, 128);
    out.put_slice(b"', with args beginning with: ");
    let mut written = 0usize;
    for arg in args {
        if written >= 128 {
            break;
        }
        out.put_u8(b'\'');
        written += push_c_str(out, arg, 128 - written) + 3;
        out.put_slice(b"' ");
    }
    out.put_slice(CRLF);
}

/// Appends Redis 7.0's error for an unknown subcommand of a container
/// command: `-ERR unknown subcommand '<sub>'. Try <CONTAINER> HELP.\r\n`
/// (`sub` cut to 128 bytes, `container` upper-cased as sent).
pub(crate) fn append_unknown_subcommand(out: &mut impl RespBuf, container: &[u8], sub: &[u8]) {
    out.put_slice(b"-ERR unknown subcommand '");
    push_c_str(out, sub, 128);
    out.put_slice(b"'. Try ");
    let start = out.len();
    push_c_str(out, container, usize::MAX);
    out[start..].make_ascii_uppercase();
    out.put_slice(b" HELP.\r\n");
}

/// Appends `-ERR wrong number of arguments for '<fullname>' command\r\n`;
/// `fullname` is Redis's lower-case name, e.g. `subscribe` or `memory|usage`.
pub(crate) fn append_wrong_arity(out: &mut impl RespBuf, fullname: &str) {
    out.put_slice(b"-ERR ");
    wrong_arity_text(out, fullname);
}

fn wrong_arity_text(out: &mut impl RespBuf, fullname: &str) {
    out.put_slice(b"wrong number of arguments for '");
    extend_sanitized(out, fullname.as_bytes());
    out.put_slice(b"' command\r\n");
}

/// Appends the refusal Redis 7.0 sends, over RESP2, for a valid command
/// that is not allowed while the connection has subscriptions:
/// `-ERR Can't execute '<fullname>': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n`.
#[cfg(test)]
pub(crate) fn append_not_allowed_in_subscribed_context(out: &mut impl RespBuf, fullname: &str) {
    out.put_slice(b"-ERR ");
    not_allowed_text(out, fullname);
}

fn not_allowed_text(out: &mut impl RespBuf, fullname: &str) {
    out.put_slice(b"Can't execute '");
    extend_sanitized(out, fullname.as_bytes());
    out.put_slice(
        b"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
}

/// Redis rejects EXEC's own errors through `execCommandAbort()`, which
/// replaces `-ERR ` with this prefix.
fn rejection_prefix(out: &mut impl RespBuf, fullname: &str) {
    if fullname == "exec" {
        out.put_slice(b"-EXECABORT Transaction discarded because of: ");
    } else {
        out.put_slice(b"-ERR ");
    }
}

/// Appends exactly what Redis 7.0 (default configuration) replies, in the
/// RESP2 subscribed context, to a command that is not one of tickfan's
/// [`Verb`](super::Verb)s (`args` as returned by [`parse_command`](super::parse_command) for `input`):
///
/// * unknown command `FOO a` → the unknown-command error;
/// * `CONFIG FOO` → the unknown-subcommand error;
/// * `GET` (bad arity) → the wrong-number-of-arguments error;
/// * `GET k`, `CONFIG GET x` → "Can't execute 'get'" / `'config|get'`;
/// * two special cases checked live: EXEC's errors carry the
///   `-EXECABORT Transaction discarded because of: ` prefix, and `DEBUG ...`,
///   `MODULE LOAD|LOADEX|UNLOAD ...` get the "command not allowed" error of
///   the default `enable-debug-command no` / `enable-module-command no`.
///
/// Exception: tickfan has no sharded pub/sub, so `SSUBSCRIBE` and
/// `SUNSUBSCRIBE` (which Redis would execute) get the unknown-command error.
/// Appends nothing for an empty command.
pub(crate) fn append_subscribed_context_rejection<B: RespBuf>(
    out: &mut B,
    input: &[u8],
    args: &[Range<usize>],
) {
    let Some((first, rest)) = args.split_first() else {
        return;
    };
    let name = &input[first.clone()];
    let second = rest.first().map(|r| &input[r.clone()]);
    let unknown = |out: &mut B| {
        append_unknown_command(out, name, rest.iter().map(|r| &input[r.clone()]));
    };
    if eq_ignore_case(name, b"ssubscribe") || eq_ignore_case(name, b"sunsubscribe") {
        return unknown(out);
    }
    match check_redis_command(name, second, args.len()) {
        CommandCheck::Unknown => unknown(out),
        CommandCheck::UnknownSubcommand => {
            append_unknown_subcommand(out, name, second.unwrap_or_default())
        }
        CommandCheck::WrongArity { fullname } => {
            rejection_prefix(out, fullname);
            wrong_arity_text(out, fullname);
        }
        CommandCheck::Valid { fullname } => {
            let protected = match fullname {
                "debug" => Some(("DEBUG", "enable-debug-command")),
                "module|load" | "module|loadex" | "module|unload" => {
                    Some(("MODULE", "enable-module-command"))
                }
                _ => None,
            };
            if let Some((what, option)) = protected {
                out.put_slice(b"-ERR ");
                out.put_slice(what.as_bytes());
                out.put_slice(b" command not allowed. If the ");
                out.put_slice(option.as_bytes());
                out.put_slice(
                    b" option is set to \"local\", you can run it from a local connection, \
                      otherwise you need to set this option in the configuration file, and then \
                      restart the server.\r\n",
                );
            } else {
                rejection_prefix(out, fullname);
                not_allowed_text(out, fullname);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::resp::test_support::{multibulk, reply};
    use crate::protocol::resp::{parse_command, Limits, Parsed, Verb};

    #[test]
    fn subscribed_context_rejections_match_redis() {
        // Sent on a connection that had run `SUBSCRIBE x`.
        let cases: &[(&[&[u8]], &[u8])] = &[
            (
                &[b"get", b"k"],
                b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
            ),
            (
                &[b"GET", b"k"],
                b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
            ),
            (&[b"get"], b"-ERR wrong number of arguments for 'get' command\r\n"),
            (
                &[b"foo", b"a"],
                b"-ERR unknown command 'foo', with args beginning with: 'a' \r\n",
            ),
            (
                &[b"config", b"foo"],
                b"-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n",
            ),
            (
                &[b"CONFIG", b"GET", b"x"],
                b"-ERR Can't execute 'config|get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
            ),
            (&[b"config"], b"-ERR wrong number of arguments for 'config' command\r\n"),
            (
                &[b"client", b"list"],
                b"-ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
            ),
            (
                &[b"command", b"docs", b"get"],
                b"-ERR Can't execute 'command|docs': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
            ),
            (
                &[b"xinfo", b"stream", b"k"],
                b"-ERR Can't execute 'xinfo|stream': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
            ),
            (
                &[b"Xinfo", b"FOO"],
                b"-ERR unknown subcommand 'FOO'. Try XINFO HELP.\r\n",
            ),
            (
                &[b"memory", b"usage"],
                b"-ERR wrong number of arguments for 'memory|usage' command\r\n",
            ),
            (
                &[b"set", b"a", b"b", b"c", b"d", b"e", b"f"],
                b"-ERR Can't execute 'set': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
            ),
            (
                &[b"exec"],
                b"-EXECABORT Transaction discarded because of: Can't execute 'exec': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
            ),
            (
                &[b"exec", b"x"],
                b"-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n",
            ),
            (&[b"debug"], b"-ERR wrong number of arguments for 'debug' command\r\n"),
            (
                &[b"debug", b"help"],
                b"-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n",
            ),
            (
                &[b"module", b"load", b"a"],
                b"-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n",
            ),
            (
                &[b"module", b"list", b"a"],
                b"-ERR wrong number of arguments for 'module|list' command\r\n",
            ),
            // tickfan-specific: no sharded pub/sub.
            (
                &[b"ssubscribe", b"a"],
                b"-ERR unknown command 'ssubscribe', with args beginning with: 'a' \r\n",
            ),
        ];
        for &(cmd, want) in cases {
            let input = multibulk(cmd);
            let mut args = Vec::new();
            assert!(matches!(
                parse_command(&input, &mut args, &Limits::default()),
                Parsed::Command { .. }
            ));
            let got = reply(|o| append_subscribed_context_rejection(o, &input, &args));
            assert_eq!(got, want, "{cmd:?}");
        }
        // Inline `GET k` gets the same refusal (live).
        let input = b"GET k\r\n";
        let mut args = Vec::new();
        parse_command(input, &mut args, &Limits::default());
        assert!(
            reply(|o| append_subscribed_context_rejection(o, input, &args))
                .starts_with(b"-ERR Can't execute 'get': ")
        );
        assert!(reply(|o| append_subscribed_context_rejection(o, b"", &[])).is_empty());
    }

    fn unknown(name: &[u8], args: &[&[u8]]) -> Vec<u8> {
        reply(|o| append_unknown_command(o, name, args.iter().copied()))
    }

    #[test]
    fn unknown_command_matches_redis() {
        let a = |n| vec![b'a'; n];
        let b10 = vec![b'b'; 10];
        let expect = |arg_text: &[u8]| {
            let mut v = b"-ERR unknown command 'foo', with args beginning with: ".to_vec();
            v.extend_from_slice(arg_text);
            v.extend_from_slice(b"\r\n");
            v
        };
        let quoted = |parts: &[&[u8]]| {
            let mut v = Vec::new();
            for p in parts {
                v.push(b'\'');
                v.extend_from_slice(p);
                v.extend_from_slice(b"' ");
            }
            v
        };
        assert_eq!(
            unknown(b"foo", &[b"a", b"b"]),
            b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"
        );
        assert_eq!(
            unknown(b"foo", &[]),
            b"-ERR unknown command 'foo', with args beginning with: \r\n"
        );
        // 128-byte budget for the quoted arguments (live, `FOO a*N b*10 c`,
        // and `FOO a*100 b*100 c`).
        assert_eq!(
            unknown(b"foo", &[&a(100), &[b'b'; 100], b"c"]),
            expect(&quoted(&[&a(100), &[b'b'; 25]]))
        );
        for (n, tail) in [
            (122, b"bbb".to_vec()),
            (123, b"bb".to_vec()),
            (124, b"b".to_vec()),
        ] {
            assert_eq!(
                unknown(b"foo", &[&a(n), &b10, b"c"]),
                expect(&quoted(&[&a(n), &tail])),
                "n={n}"
            );
        }
        for n in [125, 126] {
            assert_eq!(
                unknown(b"foo", &[&a(n), &b10, b"c"]),
                expect(&quoted(&[&a(n)]))
            );
        }
        // A single argument is cut to 128 bytes; so is the name.
        assert_eq!(
            unknown(b"FoO", &[&[b'x'; 200]]),
            [
                &b"-ERR unknown command 'FoO', with args beginning with: '"[..],
                &[b'x'; 128],
                b"' \r\n"
            ]
            .concat()
        );
        assert_eq!(
            unknown(&[b'f'; 200], &[]),
            [
                &b"-ERR unknown command '"[..],
                &[b'f'; 128],
                b"', with args beginning with: \r\n"
            ]
            .concat()
        );
        // CR/LF become spaces, NUL ends a string (live).
        assert_eq!(
            unknown(b"foo", &[b"a\r\nb", b"c\0d", b"e"]),
            b"-ERR unknown command 'foo', with args beginning with: 'a  b' 'c' 'e' \r\n"
        );
        assert_eq!(
            unknown(b"f\r\no\0x", &[b"a"]),
            b"-ERR unknown command 'f  o', with args beginning with: 'a' \r\n"
        );
        // Live: an empty multibulk argument and a lone 0xff name.
        assert_eq!(
            unknown(b"", &[]),
            b"-ERR unknown command '', with args beginning with: \r\n"
        );
        assert_eq!(
            unknown(b"\xff\0o", &[]),
            b"-ERR unknown command '\xff', with args beginning with: \r\n"
        );
    }

    #[test]
    fn wrong_arity_matches_redis() {
        for name in [
            "subscribe",
            "psubscribe",
            "ping",
            "reset",
            "get",
            "config",
            "memory|usage",
        ] {
            assert_eq!(
                reply(|o| append_wrong_arity(o, name)),
                format!("-ERR wrong number of arguments for '{name}' command\r\n").as_bytes()
            );
        }
        assert_eq!(
            reply(|o| append_wrong_arity(o, Verb::Subscribe.name().unwrap())),
            b"-ERR wrong number of arguments for 'subscribe' command\r\n"
        );
        assert_eq!(
            reply(|o| append_not_allowed_in_subscribed_context(o, "get")),
            &b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"[..]
        );
        assert_eq!(
            reply(|o| append_unknown_subcommand(o, b"config", b"foo")),
            b"-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n"
        );
    }

    #[test]
    fn protocol_error_texts() {
        // Display texts.
        assert_eq!(
            ProtocolError::ExpectedDollar(b'x').to_string(),
            "Protocol error: expected '$', got 'x'"
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(0xff).to_string(),
            "Protocol error: expected '$', got '\\xff'"
        );
        assert_eq!(
            ProtocolError::UnbalancedQuotes.to_string(),
            "Protocol error: unbalanced quotes in request"
        );
        // A NUL is where Redis's `%c` formatting would end the message.
        assert_eq!(
            reply(|o| ProtocolError::ExpectedDollar(0).append_reply(o)),
            b"-ERR Protocol error: expected '$', got '\r\n"
        );
    }
}
