//! Per-connection framing: the replies whose bytes depend on whether the
//! connection speaks RESP2 or RESP3 (switched by `HELLO 3`, back by
//! `HELLO 2` or `RESET`).
//!
//! RESP3 ("RESP3 specification" on redis.io) adds types; tickfan sends the
//! few Redis 7 uses for what it serves:
//!
//! | what                          | RESP2                 | RESP3               |
//! |-------------------------------|-----------------------|---------------------|
//! | pub/sub confirmation, message | `*3` / `*4` array     | `>3` / `>4` push    |
//! | null (no name, no channel)    | `$-1`                 | `_`                 |
//! | `HELLO` reply                 | `*14` flat array      | `%7` map            |
//! | `INFO`, `CLIENT INFO`/`LIST`  | bulk string           | `=len` `txt:` verbatim |
//! | `PING` while subscribed       | `*2 pong <arg>`       | `+PONG` / bulk, as outside |
//!
//! Everything else (simple strings, errors, integers, bulk strings) is
//! encoded the same in both, by the RESP2 encoder in [`super`].
//!
//! A message frame differs between the two only in its first byte, so the
//! publisher keeps one shared tail per update and one prefix per delivery
//! (see [`message_prefix`]): a RESP3 subscriber costs nothing extra per tick.
//!
//! Every byte here was compared with a live `redis-server` 7.0.15 (the
//! differential test in `tests/it/protocol.rs` keeps checking it).

use crate::protocol::resp::{self, RespBuf, SubscriptionKind};

/// The protocol a subscriber connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Proto {
    /// RESP2: every connection starts here.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

impl Proto {
    /// The number `HELLO` reports (`proto`) and `CLIENT INFO` shows (`resp=`).
    pub fn version(self) -> i64 {
        match self {
            Proto::Resp2 => 2,
            Proto::Resp3 => 3,
        }
    }
}

/// Frame start of a `message` (channel subscription) in `proto`: this plus
/// the shared tail of [`resp::append_message_tail`] is the whole frame.
pub fn message_prefix(proto: Proto) -> &'static [u8] {
    match proto {
        Proto::Resp2 => resp::MESSAGE_PREFIX,
        Proto::Resp3 => b">3\r\n$7\r\nmessage\r\n",
    }
}

/// Appends the frame start of a `pmessage` for `pattern` in `proto`
/// (`*4`/`>4`, `pmessage`, the pattern); the shared tail follows it.
pub(crate) fn append_pmessage_prefix(out: &mut impl RespBuf, proto: Proto, pattern: &[u8]) {
    let start = out.len();
    resp::append_pmessage_prefix(out, pattern);
    if proto == Proto::Resp3 {
        out[start] = b'>';
    }
}

/// Appends a null: `$-1` in RESP2, `_` in RESP3.
pub(crate) fn append_null(out: &mut impl RespBuf, proto: Proto) {
    match proto {
        Proto::Resp2 => resp::append_null_bulk(out),
        Proto::Resp3 => out.put_slice(b"_\r\n"),
    }
}

/// Appends the header of a map of `pairs` entries: `%<pairs>` in RESP3, a
/// flat `*<2·pairs>` array in RESP2 (how Redis degrades maps).
pub(crate) fn append_map_header(out: &mut impl RespBuf, proto: Proto, pairs: usize) {
    match proto {
        Proto::Resp2 => resp::append_array_header(out, pairs * 2),
        Proto::Resp3 => {
            out.put_u8(b'%');
            out.put_slice(itoa::Buffer::new().format(pairs).as_bytes());
            out.put_slice(b"\r\n");
        }
    }
}

/// Appends text as Redis's `addReplyVerbatim(…, "txt")` does: a bulk
/// string in RESP2, `=<len+4>\r\ntxt:<text>\r\n` in RESP3.
pub(crate) fn append_verbatim_txt(out: &mut impl RespBuf, proto: Proto, text: &[u8]) {
    match proto {
        Proto::Resp2 => resp::append_bulk(out, text),
        Proto::Resp3 => {
            out.put_u8(b'=');
            out.put_slice(itoa::Buffer::new().format(text.len() + 4).as_bytes());
            out.put_slice(b"\r\ntxt:");
            out.put_slice(text);
            out.put_slice(b"\r\n");
        }
    }
}

/// Appends one (p)(un)subscribe confirmation in `proto` (see
/// [`resp::append_subscription_reply`] for the RESP2 form); in RESP3 it is a
/// `>3` push whose missing channel is `_`.
pub(crate) fn append_subscription_reply(
    out: &mut impl RespBuf,
    proto: Proto,
    kind: SubscriptionKind,
    channel: Option<&[u8]>,
    count: usize,
) {
    if proto == Proto::Resp2 {
        return resp::append_subscription_reply(out, kind, channel, count);
    }
    out.put_slice(b">3\r\n");
    resp::append_bulk(
        out,
        match kind {
            SubscriptionKind::Subscribe => b"subscribe",
            SubscriptionKind::Unsubscribe => b"unsubscribe",
            SubscriptionKind::Psubscribe => b"psubscribe",
            SubscriptionKind::Punsubscribe => b"punsubscribe",
        },
    );
    match channel {
        Some(c) => resp::append_bulk(out, c),
        None => append_null(out, proto),
    }
    resp::append_integer(out, count as i64);
}

/// Appends Redis 7's reply to `PING [arg]`: only a RESP2 connection with
/// subscriptions gets the `*2 pong` array; RESP3 always gets `+PONG` (or
/// the argument), subscribed or not (Redis's `pingCommand`).
pub(crate) fn append_ping_reply(
    out: &mut impl RespBuf,
    proto: Proto,
    arg: Option<&[u8]>,
    subscribed: bool,
) {
    resp::append_ping_reply(out, arg, subscribed && proto == Proto::Resp2);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected bytes captured from redis-server 7.0.15 after `HELLO 3`.

    #[test]
    fn resp3_confirmations_are_push_frames() {
        let mut out = Vec::new();
        append_subscription_reply(
            &mut out,
            Proto::Resp3,
            SubscriptionKind::Subscribe,
            Some(b"a"),
            1,
        );
        append_subscription_reply(
            &mut out,
            Proto::Resp3,
            SubscriptionKind::Unsubscribe,
            None,
            0,
        );
        assert_eq!(
            out,
            b">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n>3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"
        );
        let mut two = Vec::new();
        append_subscription_reply(
            &mut two,
            Proto::Resp2,
            SubscriptionKind::Unsubscribe,
            None,
            0,
        );
        assert_eq!(two, b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    }

    #[test]
    fn message_frames_differ_only_in_their_first_byte() {
        let (two, three) = (message_prefix(Proto::Resp2), message_prefix(Proto::Resp3));
        assert_eq!(two[1..], three[1..]);
        assert_eq!((two[0], three[0]), (b'*', b'>'));
        let mut p2 = Vec::new();
        let mut p3 = Vec::new();
        append_pmessage_prefix(&mut p2, Proto::Resp2, b"EU*");
        append_pmessage_prefix(&mut p3, Proto::Resp3, b"EU*");
        assert_eq!(p3, b">4\r\n$8\r\npmessage\r\n$3\r\nEU*\r\n");
        assert_eq!(p2[1..], p3[1..]);
    }

    #[test]
    fn ping_in_resp3_is_pong_even_when_subscribed() {
        let mut out = Vec::new();
        append_ping_reply(&mut out, Proto::Resp3, None, true);
        append_ping_reply(&mut out, Proto::Resp3, Some(b"x"), true);
        assert_eq!(out, b"+PONG\r\n$1\r\nx\r\n");
        out.clear();
        append_ping_reply(&mut out, Proto::Resp2, None, true);
        assert_eq!(out, b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }

    #[test]
    fn verbatim_text_and_maps() {
        let mut out = Vec::new();
        append_verbatim_txt(&mut out, Proto::Resp3, b"");
        assert_eq!(out, b"=4\r\ntxt:\r\n");
        out.clear();
        append_verbatim_txt(&mut out, Proto::Resp2, b"");
        assert_eq!(out, b"$0\r\n\r\n");
        out.clear();
        append_map_header(&mut out, Proto::Resp3, 7);
        append_map_header(&mut out, Proto::Resp2, 7);
        append_null(&mut out, Proto::Resp3);
        assert_eq!(out, b"%7\r\n*14\r\n_\r\n");
    }
}
