//! RESP2 codec for tickfan's subscriber connections.
//!
//! Subscribers talk to tickfan with the Redis serialization protocol, version
//! 2 (the "RESP protocol specification" on redis.io), so that `redis-cli` and
//! stock Redis client libraries work unchanged. This module owns every byte
//! that crosses that boundary:
//!
//! * **Command parsing** ([`parse_command`]): incremental, zero-copy
//!   (arguments are returned as byte ranges into the caller's buffer) and
//!   allocation-free in steady state. Both request forms Redis accepts are
//!   supported: multibulk (`*N\r\n$len\r\n...\r\n`) and inline (a text line).
//!   The framing rules are those of Redis 7.0's `processMultibulkBuffer()` /
//!   `processInlineBuffer()` / `sdssplitargs()`, including their quirks (a
//!   header line ends at the first `\r` and the byte after it is skipped
//!   unchecked; the two bytes after a bulk payload are skipped unchecked).
//! * **Reply encoding** (`append_*`): simple strings, errors, integers, bulk
//!   strings, arrays, the (p)(un)subscribe confirmations, PING/QUIT/RESET
//!   replies, pub/sub message frames, and the exact error texts Redis 7.0
//!   sends for unknown commands, wrong arity and commands refused in the
//!   subscribed context.
//!
//! Every Redis reply and error text produced here was compared byte for byte
//! with a live `redis-server` 7.0.15; the captured bytes are the expected
//! values of the unit tests.
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
//! connection after replying.
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
//! * Inline arguments are byte ranges of the input, so arguments that Redis
//!   would have to rewrite (escape sequences inside quotes, or a quote that
//!   starts in the middle of an argument, as in `a"b c"`) cannot be
//!   represented; they are rejected with the tickfan-specific
//!   [`ProtocolError::UnsupportedInlineQuoting`]. Plain `"quoted args"` and
//!   `'quoted args'` work, and inputs Redis rejects as unbalanced are
//!   rejected with Redis's text.

use std::fmt;
use std::ops::Range;

/// Default [`Limits::max_args`].
pub const DEFAULT_MAX_ARGS: usize = 1024;
/// Default [`Limits::max_bulk_len`] (64 KiB).
pub const DEFAULT_MAX_BULK_LEN: usize = 64 * 1024;
/// Default [`Limits::max_inline_len`] (64 KiB, Redis's `PROTO_INLINE_MAX_SIZE`).
pub const DEFAULT_MAX_INLINE_LEN: usize = 64 * 1024;

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

/// A malformed request. [`fmt::Display`] and [`ProtocolError::append_reply`]
/// give Redis 7.0's exact wording (all but the last variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    /// `Protocol error: invalid multibulk length` (bad `*N`, or `N` above
    /// [`Limits::max_args`]).
    InvalidMultibulkLength,
    /// `Protocol error: invalid bulk length` (bad or negative `$N`, or `N`
    /// above [`Limits::max_bulk_len`]).
    InvalidBulkLength,
    /// `Protocol error: expected '$', got 'x'` with the offending byte.
    ExpectedDollar(u8),
    /// `Protocol error: too big mbulk count string` (no `\r` within
    /// [`Limits::max_inline_len`] bytes of a `*` header).
    TooBigMbulkCountString,
    /// `Protocol error: too big bulk count string` (same for a `$` header).
    TooBigBulkCountString,
    /// `Protocol error: too big inline request` (inline line longer than
    /// [`Limits::max_inline_len`], or more than [`Limits::max_args`] words).
    TooBigInlineRequest,
    /// `Protocol error: unbalanced quotes in request`.
    UnbalancedQuotes,
    /// tickfan only: an inline argument uses escapes inside quotes or a quote
    /// in mid-argument, which would need rewriting; see the module docs.
    UnsupportedInlineQuoting,
}

impl ProtocolError {
    /// Appends the error reply Redis sends for this error, e.g.
    /// `-ERR Protocol error: invalid bulk length\r\n`.
    pub fn append_reply(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"-ERR ");
        match *self {
            ProtocolError::ExpectedDollar(got) => {
                out.extend_from_slice(b"Protocol error: expected '$', got '");
                // Redis formats with `%c` into a C string and then maps CR/LF
                // to spaces: a NUL therefore ends the message right here.
                if got != 0 {
                    out.push(sanitize(got));
                    out.push(b'\'');
                }
            }
            other => out.extend_from_slice(other.static_text().as_bytes()),
        }
        out.extend_from_slice(b"\r\n");
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

fn error_at(input: &[u8], line_start: usize, error: ProtocolError) -> Parsed {
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

fn parse_inline(input: &[u8], args: &mut Vec<Range<usize>>, limits: &Limits) -> Parsed {
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

/// Redis's `string2ll()`: optional `-`, no `+`, no leading zeros (except
/// `0` itself), no spaces, must fit in an `i64`. (How Redis reads every
/// integer argument: `SELECT`, `HELLO`'s version.)
pub fn string2ll(s: &[u8]) -> Option<i64> {
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

// ---------------------------------------------------------------------------
// Command classification
// ---------------------------------------------------------------------------

/// ASCII case-insensitive byte-string equality (how Redis looks up command
/// names). Never allocates.
pub fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The commands tickfan executes on subscriber connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `SUBSCRIBE channel [channel ...]`
    Subscribe,
    /// `UNSUBSCRIBE [channel ...]`
    Unsubscribe,
    /// `PSUBSCRIBE pattern [pattern ...]`
    Psubscribe,
    /// `PUNSUBSCRIBE [pattern ...]`
    Punsubscribe,
    /// `PING [message]`
    Ping,
    /// `QUIT` (any arguments are ignored, as in Redis 7.0)
    Quit,
    /// `RESET`
    Reset,
    /// Anything else; see [`append_subscribed_context_rejection`].
    Other,
}

impl Verb {
    /// Redis's lower-case command name, as used in error messages
    /// (`None` for [`Verb::Other`]).
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Verb::Subscribe => "subscribe",
            Verb::Unsubscribe => "unsubscribe",
            Verb::Psubscribe => "psubscribe",
            Verb::Punsubscribe => "punsubscribe",
            Verb::Ping => "ping",
            Verb::Quit => "quit",
            Verb::Reset => "reset",
            Verb::Other => return None,
        })
    }

    /// Whether Redis accepts `argc` arguments (command name included) for
    /// this verb; if not, reply with [`append_wrong_arity`]. Always `true`
    /// for [`Verb::Other`].
    pub fn accepts_arg_count(self, argc: usize) -> bool {
        match self {
            Verb::Subscribe | Verb::Psubscribe => argc >= 2,
            Verb::Unsubscribe | Verb::Punsubscribe | Verb::Quit | Verb::Other => argc >= 1,
            Verb::Ping => (1..=2).contains(&argc),
            Verb::Reset => argc == 1,
        }
    }
}

/// Classifies a command name case-insensitively, without allocating.
pub fn classify(name: &[u8]) -> Verb {
    let candidate = match name.len() {
        4 if name[0].eq_ignore_ascii_case(&b'p') => Verb::Ping,
        4 => Verb::Quit,
        5 => Verb::Reset,
        9 => Verb::Subscribe,
        10 => Verb::Psubscribe,
        11 => Verb::Unsubscribe,
        12 => Verb::Punsubscribe,
        _ => return Verb::Other,
    };
    match candidate.name() {
        Some(n) if eq_ignore_case(name, n.as_bytes()) => candidate,
        _ => Verb::Other,
    }
}

/// How Redis 7.0 would resolve a command before executing it
/// (`lookupCommand()` followed by the arity check in `processCommand()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandCheck {
    /// Not a Redis command: [`append_unknown_command`].
    Unknown,
    /// A container command (`CONFIG`, `CLIENT`, ...) with an unknown
    /// subcommand: [`append_unknown_subcommand`].
    UnknownSubcommand,
    /// Known command, wrong number of arguments: [`append_wrong_arity`].
    WrongArity {
        /// Redis's full name, e.g. `get` or `memory|usage`.
        fullname: &'static str,
    },
    /// A well-formed call of a real Redis command.
    Valid {
        /// Redis's full name, e.g. `get` or `config|get`.
        fullname: &'static str,
    },
}

/// Whether `name` (any case) is a Redis 7.0.15 command.
pub fn is_known_redis_command(name: &[u8]) -> bool {
    lookup_command(name).is_some()
}

/// Resolves a command the way Redis 7.0 does: `name` is the first argument,
/// `second` the second one if any, `argc` the total argument count.
pub fn check_redis_command(name: &[u8], second: Option<&[u8]>, argc: usize) -> CommandCheck {
    let Some(&(base_name, base_arity, subs)) = lookup_command(name) else {
        return CommandCheck::Unknown;
    };
    let (fullname, arity) = match second {
        Some(sub) if argc > 1 && !subs.is_empty() => {
            match subs.binary_search_by(|&(full, _)| {
                cmp_lowercase(&full.as_bytes()[base_name.len() + 1..], sub)
            }) {
                Ok(i) => subs[i],
                Err(_) => return CommandCheck::UnknownSubcommand,
            }
        }
        _ => (base_name, base_arity),
    };
    let arity_ok = if arity >= 0 {
        argc == arity as usize
    } else {
        argc >= arity.unsigned_abs() as usize
    };
    if arity_ok {
        CommandCheck::Valid { fullname }
    } else {
        CommandCheck::WrongArity { fullname }
    }
}

fn lookup_command(name: &[u8]) -> Option<&'static CommandEntry> {
    REDIS_COMMANDS
        .binary_search_by(|&(n, _, _)| cmp_lowercase(n.as_bytes(), name))
        .ok()
        .map(|i| &REDIS_COMMANDS[i])
}

/// Compares a lower-case table entry with `key` folded to lower case.
fn cmp_lowercase(entry: &[u8], key: &[u8]) -> std::cmp::Ordering {
    entry
        .iter()
        .copied()
        .cmp(key.iter().map(|b| b.to_ascii_lowercase()))
}

// ---------------------------------------------------------------------------
// Generic reply encoding
// ---------------------------------------------------------------------------

const CRLF: &[u8] = b"\r\n";

/// CR and LF cannot appear inside a simple string or error line; Redis maps
/// them to spaces in formatted errors, and so does this module everywhere.
fn sanitize(b: u8) -> u8 {
    if b == b'\r' || b == b'\n' {
        b' '
    } else {
        b
    }
}

fn extend_sanitized(out: &mut Vec<u8>, s: &[u8]) {
    if memchr::memchr2(b'\r', b'\n', s).is_none() {
        out.extend_from_slice(s);
    } else {
        out.extend(s.iter().map(|&b| sanitize(b)));
    }
}

/// Appends a simple string, `+<s>\r\n` (CR/LF in `s` become spaces).
pub fn append_simple_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'+');
    extend_sanitized(out, s);
    out.extend_from_slice(CRLF);
}

/// Appends an error, `-<msg>\r\n`; `msg` carries its own code, as in
/// `b"ERR something"` (CR/LF in `msg` become spaces).
pub fn append_error(out: &mut Vec<u8>, msg: &[u8]) {
    out.push(b'-');
    extend_sanitized(out, msg);
    out.extend_from_slice(CRLF);
}

/// Appends an integer, `:<v>\r\n`.
pub fn append_integer(out: &mut Vec<u8>, v: i64) {
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    out.extend_from_slice(CRLF);
}

/// Appends a bulk string, `$<len>\r\n<data>\r\n`.
pub fn append_bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(data.len()).as_bytes());
    out.extend_from_slice(CRLF);
    out.extend_from_slice(data);
    out.extend_from_slice(CRLF);
}

/// Appends the RESP2 null bulk string, `$-1\r\n`.
pub fn append_null_bulk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

/// Appends an array header, `*<len>\r\n`; the caller appends the elements.
pub fn append_array_header(out: &mut Vec<u8>, len: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    out.extend_from_slice(CRLF);
}

/// Encoded size of a bulk string with a `len`-byte payload.
fn bulk_len(len: usize) -> usize {
    1 + decimal_digits(len) + 2 + len + 2
}

fn decimal_digits(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

// ---------------------------------------------------------------------------
// Replies to tickfan's own verbs
// ---------------------------------------------------------------------------

/// Appends `+OK\r\n` (the reply to QUIT, sent before closing).
pub fn append_ok(out: &mut Vec<u8>) {
    out.extend_from_slice(b"+OK\r\n");
}

/// Appends `+RESET\r\n` (the reply to RESET).
pub fn append_reset_reply(out: &mut Vec<u8>) {
    out.extend_from_slice(b"+RESET\r\n");
}

/// Appends Redis's reply to `PING [arg]`. Outside the subscribed context:
/// `+PONG\r\n`, or `arg` as a bulk string. In the RESP2 subscribed context
/// (at least one channel or pattern): `*2\r\n$4\r\npong\r\n` followed by
/// `arg` as a bulk string, or an empty bulk string without `arg`.
pub fn append_ping_reply(out: &mut Vec<u8>, arg: Option<&[u8]>, subscribed: bool) {
    if subscribed {
        out.extend_from_slice(b"*2\r\n$4\r\npong\r\n");
        append_bulk(out, arg.unwrap_or(b""));
    } else {
        match arg {
            Some(a) => append_bulk(out, a),
            None => out.extend_from_slice(b"+PONG\r\n"),
        }
    }
}

/// Which subscription confirmation to encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubscriptionKind {
    /// `subscribe`
    Subscribe,
    /// `unsubscribe`
    Unsubscribe,
    /// `psubscribe`
    Psubscribe,
    /// `punsubscribe`
    Punsubscribe,
}

impl SubscriptionKind {
    /// The already-encoded `*3` header plus the kind as a bulk string.
    fn header(self) -> &'static [u8] {
        match self {
            SubscriptionKind::Subscribe => b"*3\r\n$9\r\nsubscribe\r\n",
            SubscriptionKind::Unsubscribe => b"*3\r\n$11\r\nunsubscribe\r\n",
            SubscriptionKind::Psubscribe => b"*3\r\n$10\r\npsubscribe\r\n",
            SubscriptionKind::Punsubscribe => b"*3\r\n$12\r\npunsubscribe\r\n",
        }
    }
}

/// Appends one (p)(un)subscribe confirmation:
/// `*3\r\n$<k>\r\n<kind>\r\n$<n>\r\n<channel>\r\n:<count>\r\n`, where `count`
/// is the connection's total number of channels plus patterns after the
/// operation. Redis sends one per argument. For UNSUBSCRIBE / PUNSUBSCRIBE
/// without arguments when there was nothing of that kind to drop, pass
/// `channel = None`: Redis then sends a null bulk (`$-1`) in its place.
pub fn append_subscription_reply(
    out: &mut Vec<u8>,
    kind: SubscriptionKind,
    channel: Option<&[u8]>,
    count: usize,
) {
    out.extend_from_slice(kind.header());
    match channel {
        Some(c) => append_bulk(out, c),
        None => append_null_bulk(out),
    }
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(count).as_bytes());
    out.extend_from_slice(CRLF);
}

// ---------------------------------------------------------------------------
// Pub/sub message frames
// ---------------------------------------------------------------------------

/// Frame start of a message delivered to a SUBSCRIBE subscriber.
pub const MESSAGE_PREFIX: &[u8] = b"*3\r\n$7\r\nmessage\r\n";

const PMESSAGE_HEAD: &[u8] = b"*4\r\n$8\r\npmessage\r\n";

/// `*3\r\n$7\r\nmessage\r\n`: a channel subscriber's frame is this prefix
/// followed by the shared tail from [`append_message_tail`].
pub fn message_prefix() -> &'static [u8] {
    MESSAGE_PREFIX
}

/// Appends `*4\r\n$8\r\npmessage\r\n$<n>\r\n<pattern>\r\n`: a pattern
/// subscriber's frame is this prefix followed by the shared tail from
/// [`append_message_tail`].
pub fn append_pmessage_prefix(out: &mut Vec<u8>, pattern: &[u8]) {
    out.extend_from_slice(PMESSAGE_HEAD);
    append_bulk(out, pattern);
}

/// Exact size of [`append_pmessage_prefix`]'s output for a pattern of
/// `pattern_len` bytes.
pub fn pmessage_prefix_len(pattern_len: usize) -> usize {
    PMESSAGE_HEAD.len() + bulk_len(pattern_len)
}

/// Appends `$<n>\r\n<channel>\r\n$<m>\r\n<payload>\r\n`, the part of a
/// `message` / `pmessage` frame that is identical for every subscriber of an
/// update: encode it once and share it. Byte-identical to what Redis sends
/// after the prefix for `PUBLISH channel payload`.
pub fn append_message_tail(out: &mut Vec<u8>, channel: &[u8], payload: &[u8]) {
    out.reserve(message_tail_len(channel.len(), payload.len()));
    append_bulk(out, channel);
    append_bulk(out, payload);
}

/// Exact size of [`append_message_tail`]'s output.
pub fn message_tail_len(channel_len: usize, payload_len: usize) -> usize {
    bulk_len(channel_len) + bulk_len(payload_len)
}

// ---------------------------------------------------------------------------
// Redis 7.0 command-rejection errors
// ---------------------------------------------------------------------------

/// Appends `s` the way C's `%.<max>s` prints it (at most `max` bytes,
/// stopping at a NUL), with CR/LF mapped to spaces as Redis's
/// `rejectCommandFormat()` does. Returns the number of bytes written.
fn push_c_str(out: &mut Vec<u8>, s: &[u8], max: usize) -> usize {
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
pub fn append_unknown_command<'a, I>(out: &mut Vec<u8>, name: &[u8], args: I)
where
    I: IntoIterator<Item = &'a [u8]>,
{
    out.extend_from_slice(b"-ERR unknown command '");
    push_c_str(out, name, 128);
    out.extend_from_slice(b"', with args beginning with: ");
    let mut written = 0usize;
    for arg in args {
        if written >= 128 {
            break;
        }
        out.push(b'\'');
        written += push_c_str(out, arg, 128 - written) + 3;
        out.extend_from_slice(b"' ");
    }
    out.extend_from_slice(CRLF);
}

/// Appends Redis 7.0's error for an unknown subcommand of a container
/// command: `-ERR unknown subcommand '<sub>'. Try <CONTAINER> HELP.\r\n`
/// (`sub` cut to 128 bytes, `container` upper-cased as sent).
pub fn append_unknown_subcommand(out: &mut Vec<u8>, container: &[u8], sub: &[u8]) {
    out.extend_from_slice(b"-ERR unknown subcommand '");
    push_c_str(out, sub, 128);
    out.extend_from_slice(b"'. Try ");
    let start = out.len();
    push_c_str(out, container, usize::MAX);
    out[start..].make_ascii_uppercase();
    out.extend_from_slice(b" HELP.\r\n");
}

/// Appends `-ERR wrong number of arguments for '<fullname>' command\r\n`;
/// `fullname` is Redis's lower-case name, e.g. `subscribe` or `memory|usage`.
pub fn append_wrong_arity(out: &mut Vec<u8>, fullname: &str) {
    out.extend_from_slice(b"-ERR ");
    wrong_arity_text(out, fullname);
}

fn wrong_arity_text(out: &mut Vec<u8>, fullname: &str) {
    out.extend_from_slice(b"wrong number of arguments for '");
    extend_sanitized(out, fullname.as_bytes());
    out.extend_from_slice(b"' command\r\n");
}

/// Appends the refusal Redis 7.0 sends, over RESP2, for a valid command
/// that is not allowed while the connection has subscriptions:
/// `-ERR Can't execute '<fullname>': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n`.
pub fn append_not_allowed_in_subscribed_context(out: &mut Vec<u8>, fullname: &str) {
    out.extend_from_slice(b"-ERR ");
    not_allowed_text(out, fullname);
}

fn not_allowed_text(out: &mut Vec<u8>, fullname: &str) {
    out.extend_from_slice(b"Can't execute '");
    extend_sanitized(out, fullname.as_bytes());
    out.extend_from_slice(
        b"': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
}

/// Redis rejects EXEC's own errors through `execCommandAbort()`, which
/// replaces `-ERR ` with this prefix.
fn rejection_prefix(out: &mut Vec<u8>, fullname: &str) {
    if fullname == "exec" {
        out.extend_from_slice(b"-EXECABORT Transaction discarded because of: ");
    } else {
        out.extend_from_slice(b"-ERR ");
    }
}

/// Appends exactly what Redis 7.0 (default configuration) replies, in the
/// RESP2 subscribed context, to a command that is not one of tickfan's
/// [`Verb`]s (`args` as returned by [`parse_command`] for `input`):
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
pub fn append_subscribed_context_rejection(out: &mut Vec<u8>, input: &[u8], args: &[Range<usize>]) {
    let Some((first, rest)) = args.split_first() else {
        return;
    };
    let name = &input[first.clone()];
    let second = rest.first().map(|r| &input[r.clone()]);
    let unknown = |out: &mut Vec<u8>| {
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
                out.extend_from_slice(b"-ERR ");
                out.extend_from_slice(what.as_bytes());
                out.extend_from_slice(b" command not allowed. If the ");
                out.extend_from_slice(option.as_bytes());
                out.extend_from_slice(
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

/// `(fullname, arity)` of each subcommand of a container command.
type Subcommands = &'static [(&'static str, i32)];
/// `(name, arity, subcommands)`.
type CommandEntry = (&'static str, i32, Subcommands);

// ---------------------------------------------------------------------------
// Redis 7.0.15 command table (generated from `COMMAND` on redis-server 7.0.15)
// ---------------------------------------------------------------------------

#[rustfmt::skip]
const SUB_ACL: &[(&str, i32)] = &[
    ("acl|cat", -2), ("acl|deluser", -3), ("acl|dryrun", -4), ("acl|genpass", -2),
    ("acl|getuser", 3), ("acl|help", 2), ("acl|list", 2), ("acl|load", 2), ("acl|log", -2),
    ("acl|save", 2), ("acl|setuser", -3), ("acl|users", 2), ("acl|whoami", 2),
];
#[rustfmt::skip]
const SUB_CLIENT: &[(&str, i32)] = &[
    ("client|caching", 3), ("client|getname", 2), ("client|getredir", 2), ("client|help", 2),
    ("client|id", 2), ("client|info", 2), ("client|kill", -3), ("client|list", -2),
    ("client|no-evict", 3), ("client|pause", -3), ("client|reply", 3), ("client|setname", 3),
    ("client|tracking", -3), ("client|trackinginfo", 2), ("client|unblock", -3),
    ("client|unpause", 2),
];
#[rustfmt::skip]
const SUB_CLUSTER: &[(&str, i32)] = &[
    ("cluster|addslots", -3), ("cluster|addslotsrange", -4), ("cluster|bumpepoch", 2),
    ("cluster|count-failure-reports", 3), ("cluster|countkeysinslot", 3),
    ("cluster|delslots", -3), ("cluster|delslotsrange", -4), ("cluster|failover", -2),
    ("cluster|flushslots", 2), ("cluster|forget", 3), ("cluster|getkeysinslot", 4),
    ("cluster|help", 2), ("cluster|info", 2), ("cluster|keyslot", 3), ("cluster|links", 2),
    ("cluster|meet", -4), ("cluster|myid", 2), ("cluster|nodes", 2), ("cluster|replicas", 3),
    ("cluster|replicate", 3), ("cluster|reset", -2), ("cluster|saveconfig", 2),
    ("cluster|set-config-epoch", 3), ("cluster|setslot", -4), ("cluster|shards", 2),
    ("cluster|slaves", 3), ("cluster|slots", 2),
];
#[rustfmt::skip]
const SUB_COMMAND: &[(&str, i32)] = &[
    ("command|count", 2), ("command|docs", -2), ("command|getkeys", -4),
    ("command|getkeysandflags", -4), ("command|help", 2), ("command|info", -2),
    ("command|list", -2),
];
#[rustfmt::skip]
const SUB_CONFIG: &[(&str, i32)] = &[
    ("config|get", -3), ("config|help", 2), ("config|resetstat", 2), ("config|rewrite", 2),
    ("config|set", -4),
];
#[rustfmt::skip]
const SUB_FUNCTION: &[(&str, i32)] = &[
    ("function|delete", 3), ("function|dump", 2), ("function|flush", -2), ("function|help", 2),
    ("function|kill", 2), ("function|list", -2), ("function|load", -3), ("function|restore", -3),
    ("function|stats", 2),
];
#[rustfmt::skip]
const SUB_LATENCY: &[(&str, i32)] = &[
    ("latency|doctor", 2), ("latency|graph", 3), ("latency|help", 2), ("latency|histogram", -2),
    ("latency|history", 3), ("latency|latest", 2), ("latency|reset", -2),
];
#[rustfmt::skip]
const SUB_MEMORY: &[(&str, i32)] = &[
    ("memory|doctor", 2), ("memory|help", 2), ("memory|malloc-stats", 2), ("memory|purge", 2),
    ("memory|stats", 2), ("memory|usage", -3),
];
#[rustfmt::skip]
const SUB_MODULE: &[(&str, i32)] = &[
    ("module|help", 2), ("module|list", 2), ("module|load", -3), ("module|loadex", -3),
    ("module|unload", 3),
];
#[rustfmt::skip]
const SUB_OBJECT: &[(&str, i32)] = &[
    ("object|encoding", 3), ("object|freq", 3), ("object|help", 2), ("object|idletime", 3),
    ("object|refcount", 3),
];
#[rustfmt::skip]
const SUB_PUBSUB: &[(&str, i32)] = &[
    ("pubsub|channels", -2), ("pubsub|help", 2), ("pubsub|numpat", 2), ("pubsub|numsub", -2),
    ("pubsub|shardchannels", -2), ("pubsub|shardnumsub", -2),
];
#[rustfmt::skip]
const SUB_SCRIPT: &[(&str, i32)] = &[
    ("script|debug", 3), ("script|exists", -3), ("script|flush", -2), ("script|help", 2),
    ("script|kill", 2), ("script|load", 3),
];
#[rustfmt::skip]
const SUB_SLOWLOG: &[(&str, i32)] = &[
    ("slowlog|get", -2), ("slowlog|help", 2), ("slowlog|len", 2), ("slowlog|reset", 2),
];
#[rustfmt::skip]
const SUB_XGROUP: &[(&str, i32)] = &[
    ("xgroup|create", -5), ("xgroup|createconsumer", 5), ("xgroup|delconsumer", 5),
    ("xgroup|destroy", 4), ("xgroup|help", 2), ("xgroup|setid", -5),
];
#[rustfmt::skip]
const SUB_XINFO: &[(&str, i32)] = &[
    ("xinfo|consumers", 4), ("xinfo|groups", 3), ("xinfo|help", 2), ("xinfo|stream", -3),
];
/// Redis 7.0.15's command table as reported by `COMMAND` on a stock server:
/// `(name, arity, subcommands)`, sorted by name; subcommands are
/// `(fullname, arity)` sorted by fullname. Arity follows Redis: `n > 0`
/// means exactly `n` arguments including the name, `-n` at least `n`.
#[rustfmt::skip]
const REDIS_COMMANDS: &[CommandEntry] = &[
    ("acl", -2, SUB_ACL), ("append", 3, &[]), ("asking", 1, &[]), ("auth", -2, &[]),
    ("bgrewriteaof", 1, &[]), ("bgsave", -1, &[]), ("bitcount", -2, &[]), ("bitfield", -2, &[]),
    ("bitfield_ro", -2, &[]), ("bitop", -4, &[]), ("bitpos", -3, &[]), ("blmove", 6, &[]),
    ("blmpop", -5, &[]), ("blpop", -3, &[]), ("brpop", -3, &[]), ("brpoplpush", 4, &[]),
    ("bzmpop", -5, &[]), ("bzpopmax", -3, &[]), ("bzpopmin", -3, &[]), ("client", -2, SUB_CLIENT),
    ("cluster", -2, SUB_CLUSTER), ("command", -1, SUB_COMMAND), ("config", -2, SUB_CONFIG),
    ("copy", -3, &[]), ("dbsize", 1, &[]), ("debug", -2, &[]), ("decr", 2, &[]),
    ("decrby", 3, &[]), ("del", -2, &[]), ("discard", 1, &[]), ("dump", 2, &[]), ("echo", 2, &[]),
    ("eval", -3, &[]), ("eval_ro", -3, &[]), ("evalsha", -3, &[]), ("evalsha_ro", -3, &[]),
    ("exec", 1, &[]), ("exists", -2, &[]), ("expire", -3, &[]), ("expireat", -3, &[]),
    ("expiretime", 2, &[]), ("failover", -1, &[]), ("fcall", -3, &[]), ("fcall_ro", -3, &[]),
    ("flushall", -1, &[]), ("flushdb", -1, &[]), ("function", -2, SUB_FUNCTION),
    ("geoadd", -5, &[]), ("geodist", -4, &[]), ("geohash", -2, &[]), ("geopos", -2, &[]),
    ("georadius", -6, &[]), ("georadius_ro", -6, &[]), ("georadiusbymember", -5, &[]),
    ("georadiusbymember_ro", -5, &[]), ("geosearch", -7, &[]), ("geosearchstore", -8, &[]),
    ("get", 2, &[]), ("getbit", 3, &[]), ("getdel", 2, &[]), ("getex", -2, &[]),
    ("getrange", 4, &[]), ("getset", 3, &[]), ("hdel", -3, &[]), ("hello", -1, &[]),
    ("hexists", 3, &[]), ("hget", 3, &[]), ("hgetall", 2, &[]), ("hincrby", 4, &[]),
    ("hincrbyfloat", 4, &[]), ("hkeys", 2, &[]), ("hlen", 2, &[]), ("hmget", -3, &[]),
    ("hmset", -4, &[]), ("hrandfield", -2, &[]), ("hscan", -3, &[]), ("hset", -4, &[]),
    ("hsetnx", 4, &[]), ("hstrlen", 3, &[]), ("hvals", 2, &[]), ("incr", 2, &[]),
    ("incrby", 3, &[]), ("incrbyfloat", 3, &[]), ("info", -1, &[]), ("keys", 2, &[]),
    ("lastsave", 1, &[]), ("latency", -2, SUB_LATENCY), ("lcs", -3, &[]), ("lindex", 3, &[]),
    ("linsert", 5, &[]), ("llen", 2, &[]), ("lmove", 5, &[]), ("lmpop", -4, &[]),
    ("lolwut", -1, &[]), ("lpop", -2, &[]), ("lpos", -3, &[]), ("lpush", -3, &[]),
    ("lpushx", -3, &[]), ("lrange", 4, &[]), ("lrem", 4, &[]), ("lset", 4, &[]),
    ("ltrim", 4, &[]), ("memory", -2, SUB_MEMORY), ("mget", -2, &[]), ("migrate", -6, &[]),
    ("module", -2, SUB_MODULE), ("monitor", 1, &[]), ("move", 3, &[]), ("mset", -3, &[]),
    ("msetnx", -3, &[]), ("multi", 1, &[]), ("object", -2, SUB_OBJECT), ("persist", 2, &[]),
    ("pexpire", -3, &[]), ("pexpireat", -3, &[]), ("pexpiretime", 2, &[]), ("pfadd", -2, &[]),
    ("pfcount", -2, &[]), ("pfdebug", 3, &[]), ("pfmerge", -2, &[]), ("pfselftest", 1, &[]),
    ("ping", -1, &[]), ("psetex", 4, &[]), ("psubscribe", -2, &[]), ("psync", -3, &[]),
    ("pttl", 2, &[]), ("publish", 3, &[]), ("pubsub", -2, SUB_PUBSUB), ("punsubscribe", -1, &[]),
    ("quit", -1, &[]), ("randomkey", 1, &[]), ("readonly", 1, &[]), ("readwrite", 1, &[]),
    ("rename", 3, &[]), ("renamenx", 3, &[]), ("replconf", -1, &[]), ("replicaof", 3, &[]),
    ("reset", 1, &[]), ("restore", -4, &[]), ("restore-asking", -4, &[]), ("role", 1, &[]),
    ("rpop", -2, &[]), ("rpoplpush", 3, &[]), ("rpush", -3, &[]), ("rpushx", -3, &[]),
    ("sadd", -3, &[]), ("save", 1, &[]), ("scan", -2, &[]), ("scard", 2, &[]),
    ("script", -2, SUB_SCRIPT), ("sdiff", -2, &[]), ("sdiffstore", -3, &[]), ("select", 2, &[]),
    ("set", -3, &[]), ("setbit", 4, &[]), ("setex", 4, &[]), ("setnx", 3, &[]),
    ("setrange", 4, &[]), ("shutdown", -1, &[]), ("sinter", -2, &[]), ("sintercard", -3, &[]),
    ("sinterstore", -3, &[]), ("sismember", 3, &[]), ("slaveof", 3, &[]),
    ("slowlog", -2, SUB_SLOWLOG), ("smembers", 2, &[]), ("smismember", -3, &[]),
    ("smove", 4, &[]), ("sort", -2, &[]), ("sort_ro", -2, &[]), ("spop", -2, &[]),
    ("spublish", 3, &[]), ("srandmember", -2, &[]), ("srem", -3, &[]), ("sscan", -3, &[]),
    ("ssubscribe", -2, &[]), ("strlen", 2, &[]), ("subscribe", -2, &[]), ("substr", 4, &[]),
    ("sunion", -2, &[]), ("sunionstore", -3, &[]), ("sunsubscribe", -1, &[]), ("swapdb", 3, &[]),
    ("sync", 1, &[]), ("time", 1, &[]), ("touch", -2, &[]), ("ttl", 2, &[]), ("type", 2, &[]),
    ("unlink", -2, &[]), ("unsubscribe", -1, &[]), ("unwatch", 1, &[]), ("wait", 3, &[]),
    ("watch", -2, &[]), ("xack", -4, &[]), ("xadd", -5, &[]), ("xautoclaim", -6, &[]),
    ("xclaim", -6, &[]), ("xdel", -3, &[]), ("xgroup", -2, SUB_XGROUP), ("xinfo", -2, SUB_XINFO),
    ("xlen", 2, &[]), ("xpending", -3, &[]), ("xrange", -4, &[]), ("xread", -4, &[]),
    ("xreadgroup", -7, &[]), ("xrevrange", -4, &[]), ("xsetid", -3, &[]), ("xtrim", -4, &[]),
    ("zadd", -4, &[]), ("zcard", 2, &[]), ("zcount", 4, &[]), ("zdiff", -3, &[]),
    ("zdiffstore", -4, &[]), ("zincrby", 4, &[]), ("zinter", -3, &[]), ("zintercard", -3, &[]),
    ("zinterstore", -4, &[]), ("zlexcount", 4, &[]), ("zmpop", -4, &[]), ("zmscore", -3, &[]),
    ("zpopmax", -2, &[]), ("zpopmin", -2, &[]), ("zrandmember", -2, &[]), ("zrange", -4, &[]),
    ("zrangebylex", -4, &[]), ("zrangebyscore", -4, &[]), ("zrangestore", -5, &[]),
    ("zrank", 3, &[]), ("zrem", -3, &[]), ("zremrangebylex", 4, &[]), ("zremrangebyrank", 4, &[]),
    ("zremrangebyscore", 4, &[]), ("zrevrange", -4, &[]), ("zrevrangebylex", -4, &[]),
    ("zrevrangebyscore", -4, &[]), ("zrevrank", 3, &[]), ("zscan", -3, &[]), ("zscore", 3, &[]),
    ("zunion", -3, &[]), ("zunionstore", -4, &[]),
];

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(input: &[u8]) -> (Parsed, Vec<Vec<u8>>) {
        parse_with(input, &Limits::default())
    }

    fn parse_with(input: &[u8], limits: &Limits) -> (Parsed, Vec<Vec<u8>>) {
        let mut args = Vec::new();
        let p = parse_command(input, &mut args, limits);
        (p, args.iter().map(|r| input[r.clone()].to_vec()).collect())
    }

    fn multibulk(args: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        append_array_header(&mut out, args.len());
        for a in args {
            append_bulk(&mut out, a);
        }
        out
    }

    fn reply(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    fn err(consumed: usize, error: ProtocolError) -> Parsed {
        Parsed::Error { consumed, error }
    }

    // ----- parsing: well-formed input --------------------------------------

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

    // ----- parsing: errors, with the replies captured from redis-server ----

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

    // ----- classification ----------------------------------------------------

    #[test]
    fn classifies_verbs() {
        for (name, verb) in [
            (&b"subscribe"[..], Verb::Subscribe),
            (b"SUBSCRIBE", Verb::Subscribe),
            (b"UnSubscribe", Verb::Unsubscribe),
            (b"psubscribe", Verb::Psubscribe),
            (b"PUNSUBSCRIBE", Verb::Punsubscribe),
            (b"ping", Verb::Ping),
            (b"Quit", Verb::Quit),
            (b"RESET", Verb::Reset),
            (b"pong", Verb::Other),
            (b"ssubscribe", Verb::Other),
            (b"subscribex", Verb::Other),
            (b"", Verb::Other),
            (b"get", Verb::Other),
        ] {
            assert_eq!(classify(name), verb, "{name:?}");
        }
        assert!(eq_ignore_case(b"EURusd", b"eurUSD"));
        assert!(!eq_ignore_case(b"EURUSD", b"EURUSDX"));
        // Redis arities: subscribe -2, unsubscribe -1, ping -1 (max 2),
        // quit -1, reset 1.
        assert!(!Verb::Subscribe.accepts_arg_count(1));
        assert!(Verb::Subscribe.accepts_arg_count(3));
        assert!(Verb::Unsubscribe.accepts_arg_count(1));
        assert!(Verb::Ping.accepts_arg_count(2));
        assert!(!Verb::Ping.accepts_arg_count(3));
        assert!(Verb::Quit.accepts_arg_count(5));
        assert!(!Verb::Reset.accepts_arg_count(2));
        assert_eq!(Verb::Psubscribe.name(), Some("psubscribe"));
        assert_eq!(Verb::Other.name(), None);
    }

    #[test]
    fn command_table_is_sorted_and_consistent() {
        assert_eq!(REDIS_COMMANDS.len(), 240);
        for w in REDIS_COMMANDS.windows(2) {
            assert!(w[0].0 < w[1].0, "{} / {}", w[0].0, w[1].0);
        }
        let mut subs = 0;
        for &(name, _, sub) in REDIS_COMMANDS {
            assert_eq!(name, name.to_ascii_lowercase());
            for w in sub.windows(2) {
                assert!(w[0].0 < w[1].0);
            }
            for &(full, _) in sub {
                assert!(full.starts_with(name) && full.as_bytes()[name.len()] == b'|');
                subs += 1;
            }
        }
        assert_eq!(subs, 126);
        for verb in [
            Verb::Subscribe,
            Verb::Unsubscribe,
            Verb::Psubscribe,
            Verb::Punsubscribe,
            Verb::Ping,
            Verb::Quit,
            Verb::Reset,
        ] {
            assert!(is_known_redis_command(verb.name().unwrap().as_bytes()));
        }
    }

    #[test]
    fn checks_commands_like_redis() {
        use CommandCheck::*;
        assert_eq!(check_redis_command(b"foo", None, 1), Unknown);
        assert_eq!(
            check_redis_command(b"GeT", Some(b"k"), 2),
            Valid { fullname: "get" }
        );
        assert_eq!(
            check_redis_command(b"get", None, 1),
            WrongArity { fullname: "get" }
        );
        assert_eq!(
            check_redis_command(b"config", None, 1),
            WrongArity { fullname: "config" }
        );
        assert_eq!(
            check_redis_command(b"config", Some(b"foo"), 2),
            UnknownSubcommand
        );
        assert_eq!(
            check_redis_command(b"CONFIG", Some(b"GET"), 3),
            Valid {
                fullname: "config|get"
            }
        );
        assert_eq!(
            check_redis_command(b"memory", Some(b"usage"), 2),
            WrongArity {
                fullname: "memory|usage"
            }
        );
        // COMMAND (arity -1) is valid alone and a container with arguments.
        assert_eq!(
            check_redis_command(b"command", None, 1),
            Valid {
                fullname: "command"
            }
        );
        assert!(is_known_redis_command(b"restore-asking"));
        assert!(is_known_redis_command(b"GEORADIUS_RO"));
        assert!(!is_known_redis_command(b"get\0"));
    }

    // ----- replies, byte for byte as captured from redis-server 7.0.15 ------

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
    fn ping_quit_reset_match_redis() {
        assert_eq!(reply(|o| append_ping_reply(o, None, false)), b"+PONG\r\n");
        assert_eq!(
            reply(|o| append_ping_reply(o, Some(b"hello"), false)),
            b"$5\r\nhello\r\n"
        );
        assert_eq!(
            reply(|o| append_ping_reply(o, Some(b""), false)),
            b"$0\r\n\r\n"
        );
        assert_eq!(
            reply(|o| append_ping_reply(o, None, true)),
            b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
        );
        assert_eq!(
            reply(|o| append_ping_reply(o, Some(b"hi"), true)),
            b"*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"
        );
        assert_eq!(
            reply(|o| append_ping_reply(o, Some(b""), true)),
            b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
        );
        assert_eq!(reply(append_ok), b"+OK\r\n");
        assert_eq!(reply(append_reset_reply), b"+RESET\r\n");
    }

    #[test]
    fn subscription_replies_match_redis() {
        use SubscriptionKind::*;
        let r = |kind, chan: Option<&[u8]>, count| {
            reply(|o| append_subscription_reply(o, kind, chan, count))
        };
        assert_eq!(
            [r(Subscribe, Some(b"EURUSD"), 1), r(Subscribe, Some(b"GBPUSD"), 2)].concat(),
            b"*3\r\n$9\r\nsubscribe\r\n$6\r\nEURUSD\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$6\r\nGBPUSD\r\n:2\r\n"
        );
        assert_eq!(
            r(Psubscribe, Some(b"EUR*"), 1),
            b"*3\r\n$10\r\npsubscribe\r\n$4\r\nEUR*\r\n:1\r\n"
        );
        // UNSUBSCRIBE / PUNSUBSCRIBE with nothing to drop.
        assert_eq!(
            r(Unsubscribe, None, 0),
            b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
        );
        assert_eq!(
            r(Punsubscribe, None, 0),
            b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n"
        );
        // ...while subscribed to one pattern / one channel respectively.
        assert_eq!(
            r(Unsubscribe, None, 1),
            b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:1\r\n"
        );
        assert_eq!(
            r(Punsubscribe, None, 1),
            b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:1\r\n"
        );
        assert_eq!(
            [r(Unsubscribe, Some(b"a"), 0), r(Unsubscribe, Some(b"b"), 0)].concat(),
            b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n"
        );
        assert_eq!(
            r(Unsubscribe, Some(b"x"), 0),
            b"*3\r\n$11\r\nunsubscribe\r\n$1\r\nx\r\n:0\r\n"
        );
        assert_eq!(
            r(Punsubscribe, Some(b"a*"), 0),
            b"*3\r\n$12\r\npunsubscribe\r\n$2\r\na*\r\n:0\r\n"
        );
    }

    const TICK: &[u8] =
        b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,42,1701388800123999999";

    #[test]
    fn message_frames_match_redis() {
        let mut tail = Vec::new();
        append_message_tail(&mut tail, b"EURUSD", TICK);
        assert_eq!(tail.len(), message_tail_len(6, TICK.len()));
        let frame = [message_prefix(), &tail].concat();
        assert_eq!(
            frame,
            &b"*3\r\n$7\r\nmessage\r\n$6\r\nEURUSD\r\n$81\r\n1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,42,1701388800123999999\r\n"[..]
        );
        let mut pframe = Vec::new();
        append_pmessage_prefix(&mut pframe, b"EUR*");
        assert_eq!(pframe.len(), pmessage_prefix_len(4));
        pframe.extend_from_slice(&tail);
        assert_eq!(
            pframe,
            &b"*4\r\n$8\r\npmessage\r\n$4\r\nEUR*\r\n$6\r\nEURUSD\r\n$81\r\n1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,42,1701388800123999999\r\n"[..]
        );
        // Empty payload (live).
        let mut tail = Vec::new();
        append_message_tail(&mut tail, b"EURUSD", b"");
        assert_eq!(
            [MESSAGE_PREFIX, &tail].concat(),
            b"*3\r\n$7\r\nmessage\r\n$6\r\nEURUSD\r\n$0\r\n\r\n"
        );
        let mut pframe = Vec::new();
        append_pmessage_prefix(&mut pframe, b"EUR*");
        pframe.extend_from_slice(&tail);
        assert_eq!(
            pframe,
            b"*4\r\n$8\r\npmessage\r\n$4\r\nEUR*\r\n$6\r\nEURUSD\r\n$0\r\n\r\n"
        );
    }

    #[test]
    fn generic_encoders() {
        assert_eq!(reply(|o| append_simple_string(o, b"OK")), b"+OK\r\n");
        assert_eq!(reply(|o| append_simple_string(o, b"a\r\nb")), b"+a  b\r\n");
        assert_eq!(reply(|o| append_error(o, b"ERR boom")), b"-ERR boom\r\n");
        assert_eq!(reply(|o| append_error(o, b"ERR a\nb")), b"-ERR a b\r\n");
        // `:2\r\n` is PUBLISH's reply above; `$-1\r\n` is GET of a missing key.
        assert_eq!(reply(|o| append_integer(o, 2)), b":2\r\n");
        assert_eq!(reply(|o| append_integer(o, -42)), b":-42\r\n");
        assert_eq!(
            reply(|o| append_integer(o, i64::MIN)),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(reply(append_null_bulk), b"$-1\r\n");
        assert_eq!(reply(|o| append_bulk(o, b"hello")), b"$5\r\nhello\r\n");
        assert_eq!(reply(|o| append_array_header(o, 3)), b"*3\r\n");
        assert_eq!(reply(|o| append_array_header(o, 0)), b"*0\r\n");
        for n in [0, 9, 10, 99, 100, 12345] {
            let mut out = Vec::new();
            append_message_tail(&mut out, &vec![b'c'; n], &vec![b'p'; n + 1]);
            assert_eq!(out.len(), message_tail_len(n, n + 1));
            let mut out = Vec::new();
            append_pmessage_prefix(&mut out, &vec![b'p'; n]);
            assert_eq!(out.len(), pmessage_prefix_len(n));
        }
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

    #[test]
    fn encoders_do_not_allocate_with_capacity() {
        let mut out = Vec::with_capacity(4096);
        let ptr = out.as_ptr();
        append_message_tail(&mut out, b"EURUSD", TICK);
        out.extend_from_slice(message_prefix());
        append_pmessage_prefix(&mut out, b"EUR*");
        append_subscription_reply(&mut out, SubscriptionKind::Subscribe, Some(b"EURUSD"), 1);
        append_ping_reply(&mut out, Some(b"x"), true);
        append_unknown_command(&mut out, b"foo", [&b"a"[..], b"b"]);
        append_integer(&mut out, i64::MAX);
        assert_eq!(out.as_ptr(), ptr);
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
