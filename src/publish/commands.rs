//! Subscriber commands: the Redis pub/sub subset, answered with the same
//! reply frames Redis 7 sends (tested byte for byte against a real
//! `redis-server`).
//!
//! `SUBSCRIBE`, `UNSUBSCRIBE`, `PSUBSCRIBE`, `PUNSUBSCRIBE`, `PING`, `QUIT`,
//! `RESET`, `AUTH`, the connection-setup commands of
//! [`super::housekeeping`] (`HELLO`, `CLIENT`, `SELECT`, `INFO`, `ECHO`),
//! and tickfan's own `TICKFAN.THROTTLE` and `TICKFAN.SINCE`
//! ([`super::sub_control`], allowed in the subscribed context too).
//! Anything else gets a RESP error and the connection stays usable.
//!
//! Replies are framed for the connection's protocol ([`Proto`]): RESP2, or
//! RESP3 after `HELLO 3` (push frames for pub/sub, `_` for null). As in
//! Redis 7, a RESP2 connection with subscriptions may only (un)subscribe,
//! `PING`, `QUIT` and `RESET`; a RESP3 one may run every command.
//! Where tickfan differs from Redis, on purpose:
//! - subscribing to a symbol that has a value sends that value at once (a
//!   snapshot), after the confirmation: every message is absolute, so one is
//!   enough to know the state;
//! - a malformed frame gets the Redis protocol error, but the connection is
//!   kept: the input is skipped to the next newline.

use std::ops::Range;
use std::sync::Arc;

use crate::auth::Token;
use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::{bump, Counters};
use crate::model::warning::WarnKind;
use crate::protocol::resp::framing::{self, Proto};
use crate::protocol::resp::{self, Parsed, SubscriptionKind as Kind, Verb};
use crate::publish::history::History;
use crate::publish::housekeeping::{self, ServerInfo};
use crate::publish::routes::{Routes, SubKey};
use crate::publish::session::Session;
use crate::publish::sub_control;
use crate::symbols::SymbolId;

/// Limits on one command (one command must also fit the session's input buffer).
pub(crate) const LIMITS: resp::Limits = resp::Limits {
    max_args: 1024,
    max_bulk_len: 4096,
    max_inline_len: 16 * 1024,
};

/// What handling a session's buffered input did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Outcome {
    /// Commands handled.
    pub commands: usize,
    /// Stopped because the output buffer is past the mark; input remains.
    pub backpressure: bool,
}

/// The publisher state a command may touch.
///
/// Over 15 fields: borrows of the publisher's parts (routes, history,
/// latest values, counters) and of the connection (peer, fd) taken apart,
/// so a command borrows exactly what it touches while the session is
/// borrowed mutably beside it.
#[derive(Debug)]
pub(crate) struct CommandCtx<'a> {
    /// The subscription registry.
    pub routes: &'a mut Routes,
    /// Encoded tail of each symbol's latest value (empty = none yet).
    pub latest: &'a [Vec<u8>],
    /// Sequence number last taken of each symbol (0 = none yet).
    pub last_seqs: &'a [u64],
    /// The last updates of each symbol (`TICKFAN.SINCE`).
    pub history: &'a History,
    /// Now on the throttle windows' clock (`TICKFAN.THROTTLE`).
    pub window_now_ns: u64,
    /// The serve-wide caps a connection starts with (`--sub-max-rate`,
    /// `--sub-max-bandwidth`), restored by `RESET`.
    pub default_caps: (f64, u64),
    /// Scratch list for pattern matches (reused).
    pub matched: &'a mut Vec<SymbolId>,
    /// Counters (the publisher is their single writer).
    pub counters: &'a Counters,
    /// Output high-water mark.
    pub hwm: usize,
    /// Now, monotonic ns.
    pub now_ns: u64,
    /// Token `AUTH` must present, if any.
    pub token: Option<&'a Token>,
    /// Most channels + patterns per subscriber.
    pub max_subscriptions: usize,
    /// What `HELLO`, `INFO` and `CLIENT INFO` report.
    pub server: &'a ServerInfo,
    /// Subscribers connected now (`INFO`'s `connected_clients`).
    pub connected_clients: usize,
    /// The connection's peer address (`CLIENT INFO addr=`, log lines).
    pub peer: &'a str,
    /// The connection's socket descriptor (`CLIENT INFO fd=`).
    pub fd: std::os::fd::RawFd,
}

/// Handles every complete command in the session's input buffer, stopping
/// early when its output buffer passes the high-water mark.
pub(crate) fn handle_buffered(
    sess: &mut Session,
    key: SubKey,
    ctx: &mut CommandCtx<'_>,
) -> Outcome {
    let mut out = Outcome::default();
    // The buffer leaves the session while commands borrow both.
    let inbuf = std::mem::take(&mut sess.input);
    let mut args = std::mem::take(&mut sess.args);
    let mut pos = 0;
    while sess.state().serves_commands() {
        if sess.buf.buffered() >= ctx.hwm {
            out.backpressure = true;
            break;
        }
        let input = &inbuf.filled()[pos..];
        if input.is_empty() {
            break;
        }
        match resp::parse_command(input, &mut args, &LIMITS) {
            Parsed::Incomplete => break,
            Parsed::Command { consumed } => {
                pos += consumed;
                if args.is_empty() {
                    continue;
                }
                out.commands += 1;
                sess.last_cmd_ns = ctx.now_ns;
                bump(&ctx.counters.publish.commands, 1);
                if !execute(sess, key, input, &args, ctx) {
                    bump(&ctx.counters.publish.command_errors, 1);
                }
            }
            Parsed::Error { consumed, error } => {
                pos += consumed.max(1);
                out.commands += 1;
                bump(&ctx.counters.publish.commands, 1);
                bump(&ctx.counters.publish.command_errors, 1);
                error.append_reply(sess.out());
            }
        }
    }
    sess.input = inbuf;
    sess.args = args;
    sess.input.consume(pos);
    sess.buf.note_level();
    out
}

/// Runs one command; returns false when it was answered with an error.
fn execute(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    args: &[Range<usize>],
    ctx: &mut CommandCtx<'_>,
) -> bool {
    let arg = |i: usize| &input[args[i].clone()];
    let name = arg(0);
    // Redis 7 refuses all but (un)subscribe, PING, QUIT and RESET on a RESP2
    // connection with subscriptions, with the same bytes as here.
    let resp2_subscribed = sess.proto == Proto::Resp2 && sess.subscription_count() > 0;
    if resp::eq_ignore_case(name, b"auth") {
        return auth(sess, input, args, ctx);
    }
    if resp::eq_ignore_case(name, b"hello") && !resp2_subscribed {
        // Allowed before AUTH: it can authenticate itself.
        return housekeeping::execute(sess, key, input, args, ctx).unwrap_or(false);
    }
    let verb = resp::classify(name);
    if !sess.state().is_authed() && verb != Verb::Quit {
        resp::append_error(sess.out(), b"NOAUTH Authentication required.");
        return false;
    }
    if verb == Verb::Other {
        // tickfan's own commands, allowed in every context.
        if let Some(ok) = sub_control::execute(sess, key, input, args, ctx) {
            return ok;
        }
    }
    if !verb.accepts_arg_count(args.len()) {
        resp::append_wrong_arity(sess.out(), verb.name().unwrap_or_default());
        return false;
    }
    match verb {
        Verb::Subscribe => subscribe(sess, key, input, &args[1..], ctx),
        Verb::Psubscribe => psubscribe(sess, key, input, &args[1..], ctx),
        Verb::Unsubscribe => unsubscribe(sess, key, input, &args[1..], ctx.routes),
        Verb::Punsubscribe => punsubscribe(sess, key, input, &args[1..], ctx.routes),
        Verb::Ping => {
            let subscribed = sess.subscription_count() > 0;
            let msg = (args.len() == 2).then(|| arg(1));
            let proto = sess.proto;
            framing::append_ping_reply(sess.out(), proto, msg, subscribed);
        }
        Verb::Quit => {
            resp::append_ok(sess.out());
            sess.close_after_flush();
        }
        Verb::Reset => reset(sess, key, ctx),
        Verb::Other => {
            // tickfan serves pub/sub and connection setup only: any other
            // command is unknown here, except that in the RESP2 subscribed
            // context Redis names real commands it refuses, and so do we
            // (same bytes as redis-server).
            if resp2_subscribed {
                resp::append_subscribed_context_rejection(sess.out(), input, args);
            } else if let Some(ok) = housekeeping::execute(sess, key, input, args, ctx) {
                return ok;
            } else {
                resp::append_unknown_command(
                    sess.out(),
                    name,
                    args[1..].iter().map(|r| &input[r.clone()]),
                );
            }
            return false;
        }
    }
    true
}

/// `SUBSCRIBE`: confirmations first, as Redis sends them; then the
/// snapshots of the channels that exist.
fn subscribe(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    chans: &[Range<usize>],
    ctx: &mut CommandCtx<'_>,
) {
    let mut snapshots: Vec<SymbolId> = Vec::new();
    for r in chans {
        let ch = &input[r.clone()];
        if !sess.channels.contains(ch) && at_limit(sess, ctx) {
            continue;
        }
        if sess.channels.insert(ch.into()) {
            if let Some(id) = ctx.routes.subscribe(key, ch) {
                snapshots.push(id);
            }
        }
        let count = sess.subscription_count();
        confirm(sess, Kind::Subscribe, Some(ch), count);
    }
    let prefix = framing::message_prefix(sess.proto);
    for id in snapshots {
        offer_snapshot(sess, id, prefix, ctx);
    }
}

/// `PSUBSCRIBE`: confirmations first; then the snapshots of the symbols
/// each new pattern matches.
fn psubscribe(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    pats: &[Range<usize>],
    ctx: &mut CommandCtx<'_>,
) {
    let mut snapshots = Vec::new();
    for r in pats {
        let pat = &input[r.clone()];
        if !sess.patterns.contains(pat) && at_limit(sess, ctx) {
            continue;
        }
        if sess.patterns.insert(pat.into()) {
            ctx.matched.clear();
            let prefix = ctx.routes.psubscribe(key, pat, ctx.matched);
            snapshots.extend(ctx.matched.iter().map(|&id| (id, Arc::clone(&prefix))));
        }
        let count = sess.subscription_count();
        confirm(sess, Kind::Psubscribe, Some(pat), count);
    }
    for (id, prefix) in snapshots {
        offer_snapshot(sess, id, &prefix, ctx);
    }
}

/// `UNSUBSCRIBE` of the channels named (all of them when none is).
fn unsubscribe(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    chans: &[Range<usize>],
    routes: &mut Routes,
) {
    if chans.is_empty() {
        return unsubscribe_all(sess, key, routes);
    }
    for r in chans {
        let ch = &input[r.clone()];
        if sess.channels.shift_remove(ch) {
            routes.unsubscribe(key, ch);
        }
        let count = sess.subscription_count();
        confirm(sess, Kind::Unsubscribe, Some(ch), count);
    }
}

/// `PUNSUBSCRIBE` of the patterns named (all of them when none is).
fn punsubscribe(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    pats: &[Range<usize>],
    routes: &mut Routes,
) {
    if pats.is_empty() {
        return punsubscribe_all(sess, key, routes);
    }
    for r in pats {
        let pat = &input[r.clone()];
        if sess.patterns.shift_remove(pat) {
            routes.punsubscribe(key, pat);
        }
        let count = sess.subscription_count();
        confirm(sess, Kind::Punsubscribe, Some(pat), count);
    }
}

/// Like Redis `RESET`: leave every subscription, back to RESP2, database
/// 0, no name (and the serve-wide caps), and unauthenticated again when a
/// token is required; then `+RESET`.
fn reset(sess: &mut Session, key: SubKey, ctx: &mut CommandCtx<'_>) {
    let chans: Vec<Box<[u8]>> = sess.channels.drain(..).collect();
    for ch in &chans {
        ctx.routes.unsubscribe(key, ch);
    }
    let pats: Vec<Box<[u8]>> = sess.patterns.drain(..).collect();
    for p in &pats {
        ctx.routes.punsubscribe(key, p);
    }
    sess.proto = Proto::Resp2;
    ctx.routes.set_proto(key, Proto::Resp2);
    sess.db = 0;
    sess.name = None;
    let (rate, bytes) = ctx.default_caps;
    sess.throttle.set_rate(rate, ctx.window_now_ns);
    sess.throttle.set_bandwidth(bytes, ctx.window_now_ns);
    if ctx.token.is_some() {
        sess.require_auth();
    } else {
        sess.authenticate();
    }
    resp::append_reset_reply(sess.out());
}

/// Refuses one more subscription when the client holds the maximum (an
/// error reply in place of its confirmation, counted).
pub(crate) fn at_limit(sess: &mut Session, ctx: &CommandCtx<'_>) -> bool {
    if sess.subscription_count() < ctx.max_subscriptions {
        return false;
    }
    let msg = format!(
        "ERR max subscriptions per client ({}) reached",
        ctx.max_subscriptions
    );
    resp::append_error(sess.out(), msg.as_bytes());
    bump(&ctx.counters.publish.subscriptions_refused, 1);
    true
}

/// `AUTH <token>` or `AUTH default <token>`, with Redis's replies. A wrong
/// token is answered and the connection closed.
fn auth(sess: &mut Session, input: &[u8], args: &[Range<usize>], ctx: &CommandCtx<'_>) -> bool {
    let arg = |i: usize| &input[args[i].clone()];
    if !(2..=3).contains(&args.len()) {
        resp::append_wrong_arity(sess.out(), "auth");
        return false;
    }
    let user_ok = args.len() == 2 || arg(1) == b"default";
    let Some(token) = ctx.token else {
        if args.len() == 2 {
            resp::append_error(
                sess.out(),
                b"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            );
            return false;
        }
        if user_ok {
            resp::append_ok(sess.out());
            return true;
        }
        resp::append_error(
            sess.out(),
            b"WRONGPASS invalid username-password pair or user is disabled.",
        );
        return false;
    };
    if user_ok && token.verify(arg(args.len() - 1)) {
        sess.authenticate();
        resp::append_ok(sess.out());
        return true;
    }
    resp::append_error(
        sess.out(),
        b"WRONGPASS invalid username-password pair or user is disabled.",
    );
    sess.close_after_flush();
    bump(&ctx.counters.publish.auth_failures, 1);
    warn_repeating!(
        WarnKind::AuthRefused,
        "subscriber {}: wrong token; closing",
        ctx.peer
    );
    false
}

fn offer_snapshot(sess: &mut Session, id: SymbolId, prefix: &[u8], ctx: &CommandCtx<'_>) {
    let tail = &ctx.latest[id as usize];
    if !tail.is_empty() {
        sess.buf.offer(id, prefix, tail, ctx.now_ns);
    }
}

/// One (p)(un)subscribe confirmation in the session's protocol.
fn confirm(sess: &mut Session, kind: Kind, channel: Option<&[u8]>, count: usize) {
    let proto = sess.proto;
    framing::append_subscription_reply(sess.out(), proto, kind, channel, count);
}

fn unsubscribe_all(sess: &mut Session, key: SubKey, routes: &mut Routes) {
    if sess.channels.is_empty() {
        let count = sess.subscription_count();
        confirm(sess, Kind::Unsubscribe, None, count);
        return;
    }
    while let Some(ch) = sess.channels.shift_remove_index(0) {
        routes.unsubscribe(key, &ch);
        let count = sess.subscription_count();
        confirm(sess, Kind::Unsubscribe, Some(&ch), count);
    }
}

fn punsubscribe_all(sess: &mut Session, key: SubKey, routes: &mut Routes) {
    if sess.patterns.is_empty() {
        let count = sess.subscription_count();
        confirm(sess, Kind::Punsubscribe, None, count);
        return;
    }
    while let Some(p) = sess.patterns.shift_remove_index(0) {
        routes.punsubscribe(key, &p);
        let count = sess.subscription_count();
        confirm(sess, Kind::Punsubscribe, Some(&p), count);
    }
}
