//! tickfan's own subscriber commands, beside the Redis subset of
//! [`super::commands`]; both are allowed in the RESP2 subscribed context.
//!
//! - `TICKFAN.THROTTLE <updates/s per symbol> [MAXBYTES <bytes/s>]` sets
//!   the connection's caps ([`super::throttle`]); `0` removes a cap; an
//!   omitted `MAXBYTES` leaves the bandwidth cap as it was. Reply `+OK`
//!   (in RESP2 subscribed mode too: redis-py hands it over as a `pong`
//!   message whose data is `OK`).
//! - `TICKFAN.SINCE <symbol> <seq>`: the connection is subscribed to the
//!   symbol's channel (the same confirmation `SUBSCRIBE` sends), then gets
//!   every update the publisher took after `seq`, oldest first, as
//!   ordinary `message` frames from the history ring ([`super::history`]),
//!   then the live updates. Nothing is lost or repeated between the two:
//!   the publisher thread runs the command between two fan-out steps.
//!   When the updates after `seq` were evicted: `-ERR TICKFAN gap: oldest
//!   held seq is N; fetch a snapshot` and nothing is subscribed.
//!
//! Bad input (a cap that is not a non-negative number, an unknown symbol,
//! a sequence ahead of the newest, a syntax error) gets one `-ERR TICKFAN
//! …` line, is counted in `command_errors`, and the connection stays as
//! it was.
//!
//! Also here: how long the publisher may park while a throttle holds
//! symbols back ([`Publisher::throttle_wait`]).
//!
//! Single owner: the publisher thread.

use std::ops::Range;

use crate::metrics::counters::bump;
use crate::protocol::resp::framing;
use crate::protocol::resp::{self, string2ll, SubscriptionKind as Kind};
use crate::publish::commands::{at_limit, CommandCtx};
use crate::publish::routes::SubKey;
use crate::publish::session::Session;
use crate::publish::throttle::MAX_RATE;

/// Runs `name` when it is one of tickfan's own commands: `Some(ok)`, or
/// `None` for any other command.
pub(crate) fn execute(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    args: &[Range<usize>],
    ctx: &mut CommandCtx<'_>,
) -> Option<bool> {
    let name = &input[args[0].clone()];
    if resp::eq_ignore_case(name, b"tickfan.throttle") {
        Some(throttle(sess, input, args, ctx))
    } else if resp::eq_ignore_case(name, b"tickfan.since") {
        Some(since(sess, key, input, args, ctx))
    } else {
        None
    }
}

fn error(sess: &mut Session, msg: &str) -> bool {
    resp::append_error(sess.out(), msg.as_bytes());
    false
}

/// A rate: a decimal number in `0..=MAX_RATE` (`0.5` = one update every 2 s).
fn parse_rate(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if !text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None; // no sign, exponent, inf or nan
    }
    let v: f64 = text.parse().ok()?;
    (v.is_finite() && (0.0..=MAX_RATE).contains(&v)).then_some(v)
}

/// A non-negative integer, as Redis reads integers.
fn parse_count(s: &[u8]) -> Option<u64> {
    string2ll(s).and_then(|v| u64::try_from(v).ok())
}

/// `TICKFAN.THROTTLE <rate> [MAXBYTES <bytes/s>]`.
fn throttle(sess: &mut Session, input: &[u8], args: &[Range<usize>], ctx: &CommandCtx<'_>) -> bool {
    let arg = |i: usize| &input[args[i].clone()];
    if args.len() != 2 && args.len() != 4 {
        resp::append_wrong_arity(sess.out(), "tickfan.throttle");
        return false;
    }
    let Some(rate) = parse_rate(arg(1)) else {
        return error(
            sess,
            "ERR TICKFAN throttle: max updates per second must be a number from 0 to 1000000 (0 removes the cap)",
        );
    };
    let bytes = if args.len() == 4 {
        if !resp::eq_ignore_case(arg(2), b"maxbytes") {
            return error(
                sess,
                "ERR TICKFAN throttle: syntax is TICKFAN.THROTTLE <updates/s> [MAXBYTES <bytes/s>]",
            );
        }
        let Some(b) = parse_count(arg(3)) else {
            return error(
                sess,
                "ERR TICKFAN throttle: MAXBYTES must be a non-negative integer (0 removes the cap)",
            );
        };
        Some(b)
    } else {
        None
    };
    let now = ctx.window_now_ns;
    sess.throttle.set_rate(rate, now);
    if let Some(b) = bytes {
        sess.throttle.set_bandwidth(b, now);
    }
    resp::append_ok(sess.out());
    true
}

/// `TICKFAN.SINCE <symbol> <seq>`.
fn since(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    args: &[Range<usize>],
    ctx: &mut CommandCtx<'_>,
) -> bool {
    let arg = |i: usize| &input[args[i].clone()];
    if args.len() != 3 {
        resp::append_wrong_arity(sess.out(), "tickfan.since");
        return false;
    }
    let (symbol, seq) = (arg(1), arg(2));
    let Some(after) = parse_count(seq) else {
        return error(
            sess,
            "ERR TICKFAN since: seq must be a non-negative integer (the last sequence number held, 0 for none)",
        );
    };
    let Some(id) = ctx.routes.id(symbol) else {
        let msg = format!(
            "ERR TICKFAN since: unknown symbol '{}'",
            String::from_utf8_lossy(symbol)
        );
        return error(sess, &msg);
    };
    let latest = ctx.last_seqs[id as usize];
    if after > latest {
        let msg = format!(
            "ERR TICKFAN since: seq {after} is ahead of the newest update of '{}' ({latest})",
            String::from_utf8_lossy(symbol)
        );
        return error(sess, &msg);
    }
    // Check the gap before touching anything: an error leaves the
    // connection as it was.
    if let Err(e) = ctx.history.since(id, after, latest, |_, _| {}) {
        return error(sess, &format!("ERR {e}"));
    }
    if !sess.channels.contains(symbol) {
        if at_limit(sess, ctx) {
            return false;
        }
        sess.channels.insert(symbol.into());
        ctx.routes.subscribe(key, symbol);
    }
    let count = sess.subscription_count();
    let proto = sess.proto;
    framing::append_subscription_reply(sess.out(), proto, Kind::Subscribe, Some(symbol), count);
    let prefix = framing::message_prefix(proto);
    let mut frames = 0u64;
    let buf = &mut sess.buf;
    // Checked above; the ring does not change while the command runs.
    let _ = ctx.history.since(id, after, latest, |_, tail| {
        buf.append_frame(prefix, tail);
        frames += 1;
    });
    bump(&ctx.counters.publish.since_frames, frames);
    true
}
