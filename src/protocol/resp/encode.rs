//! The RESP2 reply encoder: `append_*` functions that write one reply into
//! a [`RespBuf`] (a connection's `BytesMut` write buffer, or a `Vec<u8>`
//! scratch) and never allocate once the buffer has room.
//!
//! * generic types: simple strings, errors, integers, bulk strings, the null
//!   bulk, array headers (CR/LF inside a simple string or an error become
//!   spaces, as Redis maps them);
//! * the replies to tickfan's own verbs: the (p)(un)subscribe
//!   confirmations, PING, QUIT and RESET;
//! * pub/sub message frames, cut into a per-subscriber prefix and a tail that
//!   is encoded once per update and shared by every subscriber
//!   ([`append_message_tail`]).
//!
//! Every frame was compared byte for byte with a live `redis-server`
//! 7.0.15. The RESP3 forms of the replies that differ by protocol version
//! are in [`super::framing`].

use std::ops::DerefMut;

use bytes::{BufMut, BytesMut};

/// What the encoders append to: a subscriber's write buffer (a
/// [`BytesMut`], so a reply goes straight into it) or a `Vec<u8>` (the
/// fan-out's per-update tail and per-delivery prefixes, tests, clients).
/// Appends go through [`BufMut`]; the bytes written are reachable as a
/// slice for the two encoders that patch one they wrote (RESP3's `>`, an
/// upper-cased container name).
pub trait RespBuf: BufMut + DerefMut<Target = [u8]> {
    /// Makes room for `additional` more bytes (`reserve` of the type).
    fn reserve_room(&mut self, additional: usize);
}

impl RespBuf for Vec<u8> {
    #[inline]
    fn reserve_room(&mut self, additional: usize) {
        self.reserve(additional);
    }
}

impl RespBuf for BytesMut {
    #[inline]
    fn reserve_room(&mut self, additional: usize) {
        self.reserve(additional);
    }
}

/// The line terminator of every RESP frame.
pub(super) const CRLF: &[u8] = b"\r\n";

/// CR and LF cannot appear inside a simple string or error line; Redis maps
/// them to spaces in formatted errors, and so does this module everywhere.
pub(super) fn sanitize(b: u8) -> u8 {
    if b == b'\r' || b == b'\n' {
        b' '
    } else {
        b
    }
}

/// Appends `s` with CR/LF mapped to spaces ([`sanitize`]).
pub(super) fn extend_sanitized(out: &mut impl RespBuf, s: &[u8]) {
    if memchr::memchr2(b'\r', b'\n', s).is_none() {
        out.put_slice(s);
    } else {
        for &b in s {
            out.put_u8(sanitize(b));
        }
    }
}

/// Appends a simple string, `+<s>\r\n` (CR/LF in `s` become spaces).
#[cfg(test)]
pub(crate) fn append_simple_string(out: &mut impl RespBuf, s: &[u8]) {
    out.put_u8(b'+');
    extend_sanitized(out, s);
    out.put_slice(CRLF);
}

/// Appends an error, `-<msg>\r\n`; `msg` carries its own code, as in
/// `b"ERR something"` (CR/LF in `msg` become spaces).
pub(crate) fn append_error(out: &mut impl RespBuf, msg: &[u8]) {
    out.put_u8(b'-');
    extend_sanitized(out, msg);
    out.put_slice(CRLF);
}

/// Appends an integer, `:<v>\r\n`.
pub(crate) fn append_integer(out: &mut impl RespBuf, v: i64) {
    out.put_u8(b':');
    out.put_slice(itoa::Buffer::new().format(v).as_bytes());
    out.put_slice(CRLF);
}

/// Appends a bulk string, `$<len>\r\n<data>\r\n`.
pub(crate) fn append_bulk(out: &mut impl RespBuf, data: &[u8]) {
    out.put_u8(b'$');
    out.put_slice(itoa::Buffer::new().format(data.len()).as_bytes());
    out.put_slice(CRLF);
    out.put_slice(data);
    out.put_slice(CRLF);
}

/// Appends the RESP2 null bulk string, `$-1\r\n`.
pub(crate) fn append_null_bulk(out: &mut impl RespBuf) {
    out.put_slice(b"$-1\r\n");
}

/// Appends an array header, `*<len>\r\n`; the caller appends the elements.
pub(crate) fn append_array_header(out: &mut impl RespBuf, len: usize) {
    out.put_u8(b'*');
    out.put_slice(itoa::Buffer::new().format(len).as_bytes());
    out.put_slice(CRLF);
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

/// Appends `+OK\r\n` (the reply to QUIT, sent before closing).
pub(crate) fn append_ok(out: &mut impl RespBuf) {
    out.put_slice(b"+OK\r\n");
}

/// Appends `+RESET\r\n` (the reply to RESET).
pub(crate) fn append_reset_reply(out: &mut impl RespBuf) {
    out.put_slice(b"+RESET\r\n");
}

/// Appends Redis's reply to `PING [arg]`. Outside the subscribed context:
/// `+PONG\r\n`, or `arg` as a bulk string. In the RESP2 subscribed context
/// (at least one channel or pattern): `*2\r\n$4\r\npong\r\n` followed by
/// `arg` as a bulk string, or an empty bulk string without `arg`.
pub(crate) fn append_ping_reply(out: &mut impl RespBuf, arg: Option<&[u8]>, subscribed: bool) {
    if subscribed {
        out.put_slice(b"*2\r\n$4\r\npong\r\n");
        append_bulk(out, arg.unwrap_or(b""));
    } else {
        match arg {
            Some(a) => append_bulk(out, a),
            None => out.put_slice(b"+PONG\r\n"),
        }
    }
}

/// Which subscription confirmation to encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SubscriptionKind {
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
pub(crate) fn append_subscription_reply(
    out: &mut impl RespBuf,
    kind: SubscriptionKind,
    channel: Option<&[u8]>,
    count: usize,
) {
    out.put_slice(kind.header());
    match channel {
        Some(c) => append_bulk(out, c),
        None => append_null_bulk(out),
    }
    out.put_u8(b':');
    out.put_slice(itoa::Buffer::new().format(count).as_bytes());
    out.put_slice(CRLF);
}

/// Frame start of a message delivered to a SUBSCRIBE subscriber.
pub const MESSAGE_PREFIX: &[u8] = b"*3\r\n$7\r\nmessage\r\n";

const PMESSAGE_HEAD: &[u8] = b"*4\r\n$8\r\npmessage\r\n";

/// `*3\r\n$7\r\nmessage\r\n`: a channel subscriber's frame is this prefix
/// followed by the shared tail from [`append_message_tail`].
#[cfg(test)]
pub(super) fn message_prefix() -> &'static [u8] {
    MESSAGE_PREFIX
}

/// Appends `*4\r\n$8\r\npmessage\r\n$<n>\r\n<pattern>\r\n`: a pattern
/// subscriber's frame is this prefix followed by the shared tail from
/// [`append_message_tail`].
pub(crate) fn append_pmessage_prefix(out: &mut impl RespBuf, pattern: &[u8]) {
    out.put_slice(PMESSAGE_HEAD);
    append_bulk(out, pattern);
}

/// Exact size of [`append_pmessage_prefix`]'s output for a pattern of
/// `pattern_len` bytes.
#[cfg(test)]
pub(crate) fn pmessage_prefix_len(pattern_len: usize) -> usize {
    PMESSAGE_HEAD.len() + bulk_len(pattern_len)
}

/// Appends `$<n>\r\n<channel>\r\n$<m>\r\n<payload>\r\n`, the part of a
/// `message` / `pmessage` frame that is identical for every subscriber of an
/// update: encode it once and share it. Byte-identical to what Redis sends
/// after the prefix for `PUBLISH channel payload`.
pub fn append_message_tail(out: &mut impl RespBuf, channel: &[u8], payload: &[u8]) {
    out.reserve_room(message_tail_len(channel.len(), payload.len()));
    append_bulk(out, channel);
    append_bulk(out, payload);
}

/// Exact size of [`append_message_tail`]'s output.
pub fn message_tail_len(channel_len: usize, payload_len: usize) -> usize {
    bulk_len(channel_len) + bulk_len(payload_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::resp::append_unknown_command;
    use crate::protocol::resp::test_support::reply;

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

    /// Every encoder a subscriber's reply takes, into `out`.
    fn all_replies<B: RespBuf>(out: &mut B) {
        use crate::protocol::resp::framing::{self, Proto};
        use crate::protocol::resp::{append_unknown_subcommand, ProtocolError};
        append_message_tail(out, b"EURUSD", TICK);
        append_pmessage_prefix(out, b"EUR*");
        framing::append_pmessage_prefix(out, Proto::Resp3, b"EUR*");
        append_subscription_reply(out, SubscriptionKind::Unsubscribe, None, 1);
        framing::append_subscription_reply(out, Proto::Resp3, SubscriptionKind::Subscribe, None, 2);
        append_ping_reply(out, Some(b"x"), true);
        append_unknown_command(out, b"foo\r", [&b"a\nb"[..], b"c"]);
        append_unknown_subcommand(out, b"config", b"nope");
        ProtocolError::ExpectedDollar(b'x').append_reply(out);
        append_simple_string(out, b"a\r\nb");
        append_integer(out, i64::MIN);
        framing::append_map_header(out, Proto::Resp3, 7);
        framing::append_verbatim_txt(out, Proto::Resp3, b"id=1");
        framing::append_null(out, Proto::Resp3);
    }

    #[test]
    fn a_bytes_mut_gets_the_same_bytes_as_a_vec_without_allocating() {
        let mut v = Vec::new();
        all_replies(&mut v);
        let mut b = bytes::BytesMut::with_capacity(4096);
        let ptr = b.as_ptr();
        all_replies(&mut b);
        assert_eq!(&b[..], &v[..]);
        assert_eq!(b.as_ptr(), ptr);
        assert!(v.windows(6).any(|w| w == b"CONFIG"), "upper-cased in place");
    }
}
