//! Connection-setup and housekeeping commands that stock Redis clients send
//! before they subscribe: `HELLO`, `CLIENT SETNAME|GETNAME|SETINFO|ID|INFO|LIST`,
//! `SELECT`, `INFO`, `ECHO`. Each answers as Redis 7 does (bytes compared
//! with a live `redis-server` 7.0.15; `CLIENT SETINFO`, new in 7.2, as 7.2
//! answers it).
//!
//! What tickfan chose where it is not Redis:
//! - `HELLO` reports `server: redis` and `version: 7.0.15`, the Redis whose
//!   behaviour it matches (clients gate features on that number);
//!   `INFO` adds `tickfan_version`.
//! - `SELECT 0`–`15` is accepted and shown in `CLIENT INFO` (`db=`); pub/sub
//!   does not depend on the database, in Redis as here.
//! - `CLIENT` is in [`super::client_cmd`].
//! - `INFO` has three sections: `server`, `clients`, `persistence`.
//!
//! Single owner: the publisher thread (called from [`super::commands`]).

use std::fmt::Write as _;
use std::ops::Range;

use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::bump;
use crate::model::warning::WarnKind;
use crate::protocol::resp::framing::{self, Proto};
use crate::protocol::resp::{self, string2ll};
use crate::publish::client_cmd;
use crate::publish::commands::CommandCtx;
use crate::publish::routes::SubKey;
use crate::publish::session::Session;

/// The Redis version whose replies tickfan reproduces (`HELLO`, `INFO`).
pub(crate) const REDIS_VERSION: &str = "7.0.15";

/// Facts about the engine that `HELLO`, `INFO` and `CLIENT INFO` report.
#[derive(Debug, Clone)]
pub(crate) struct ServerInfo {
    /// The subscriber port.
    pub tcp_port: u16,
    /// The subscriber listener's address, as text (`laddr=`).
    pub laddr: String,
    /// When the publisher started, monotonic ns (uptime).
    pub started_ns: u64,
    /// Most simultaneous subscribers (`maxclients`).
    pub max_clients: usize,
}

/// Runs `name` if it is one of this module's commands; returns `None` when
/// it is not (the caller answers "unknown command"), else whether it
/// succeeded. The caller has checked authentication (except for `HELLO`,
/// which may authenticate itself) and the RESP2 subscribed context.
pub(crate) fn execute(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    args: &[Range<usize>],
    ctx: &mut CommandCtx<'_>,
) -> Option<bool> {
    let name = &input[args[0].clone()];
    let is = |n: &[u8]| resp::eq_ignore_case(name, n);
    Some(if is(b"hello") {
        hello(sess, key, input, args, ctx)
    } else if is(b"client") {
        client_cmd::client(sess, input, args, ctx)
    } else if is(b"select") {
        select(sess, input, args)
    } else if is(b"info") {
        info(sess, input, args, ctx)
    } else if is(b"echo") {
        if args.len() != 2 {
            resp::append_wrong_arity(sess.out(), "echo");
            return Some(false);
        }
        let msg = &input[args[1].clone()];
        resp::append_bulk(sess.out(), msg);
        true
    } else {
        return None;
    })
}

/// Redis's `validateClientName()`: printable ASCII, no spaces.
pub(crate) fn valid_attr(v: &[u8]) -> bool {
    v.iter().all(|b| (b'!'..=b'~').contains(b))
}

pub(crate) const BAD_NAME: &[u8] =
    b"ERR Client names cannot contain spaces, newlines or special characters.";

/// `HELLO [protover [AUTH user pass] [SETNAME name]]`.
fn hello(
    sess: &mut Session,
    key: SubKey,
    input: &[u8],
    args: &[Range<usize>],
    ctx: &mut CommandCtx<'_>,
) -> bool {
    let arg = |i: usize| &input[args[i].clone()];
    let mut proto = None;
    let mut next = 1;
    if args.len() >= 2 {
        match string2ll(arg(1)) {
            None => {
                resp::append_error(
                    sess.out(),
                    b"ERR Protocol version is not an integer or out of range",
                );
                return false;
            }
            Some(2) => proto = Some(Proto::Resp2),
            Some(3) => proto = Some(Proto::Resp3),
            Some(_) => {
                resp::append_error(sess.out(), b"NOPROTO unsupported protocol version");
                return false;
            }
        }
        next = 2;
    }
    let (mut auth, mut setname) = (None, None);
    let mut j = next;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = arg(j);
        if resp::eq_ignore_case(opt, b"auth") && more >= 2 {
            auth = Some((arg(j + 1), arg(j + 2)));
            j += 3;
        } else if resp::eq_ignore_case(opt, b"setname") && more >= 1 {
            if !valid_attr(arg(j + 1)) {
                resp::append_error(sess.out(), BAD_NAME);
                return false;
            }
            setname = Some(arg(j + 1));
            j += 2;
        } else {
            let mut msg = b"ERR Syntax error in HELLO option '".to_vec();
            msg.extend_from_slice(opt);
            msg.push(b'\'');
            resp::append_error(sess.out(), &msg);
            return false;
        }
    }
    if let Some((user, pass)) = auth {
        if !check_credentials(sess, user, pass, ctx) {
            return false;
        }
    }
    if !sess.state().is_authed() {
        resp::append_error(
            sess.out(),
            b"NOAUTH HELLO must be called with the client already authenticated, otherwise the \
              HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client \
              and select the RESP protocol version at the same time",
        );
        return false;
    }
    if let Some(n) = setname {
        sess.name = (!n.is_empty()).then(|| n.into());
    }
    if let Some(p) = proto {
        sess.proto = p;
        ctx.routes.set_proto(key, p);
    }
    let (id, proto) = (sess.id, sess.proto);
    let out = sess.out();
    framing::append_map_header(out, proto, 7);
    for (k, v) in [("server", "redis"), ("version", REDIS_VERSION)] {
        resp::append_bulk(out, k.as_bytes());
        resp::append_bulk(out, v.as_bytes());
    }
    resp::append_bulk(out, b"proto");
    resp::append_integer(out, proto.version());
    resp::append_bulk(out, b"id");
    resp::append_integer(out, id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        resp::append_bulk(out, k.as_bytes());
        resp::append_bulk(out, v.as_bytes());
    }
    resp::append_bulk(out, b"modules");
    resp::append_array_header(out, 0);
    true
}

/// `HELLO … AUTH user pass` against the engine's token, with `AUTH`'s rules:
/// user `default` only; a wrong token is answered, counted and the
/// connection closed; with no token configured any password passes (Redis's
/// `nopass` default user).
pub(crate) fn check_credentials(
    sess: &mut Session,
    user: &[u8],
    pass: &[u8],
    ctx: &CommandCtx<'_>,
) -> bool {
    const WRONGPASS: &[u8] = b"WRONGPASS invalid username-password pair or user is disabled.";
    let user_ok = user == b"default";
    match ctx.token {
        None if user_ok => true,
        None => {
            resp::append_error(sess.out(), WRONGPASS);
            false
        }
        Some(token) if user_ok && token.verify(pass) => {
            sess.authenticate();
            true
        }
        Some(_) => {
            resp::append_error(sess.out(), WRONGPASS);
            sess.close_after_flush();
            bump(&ctx.counters.publish.auth_failures, 1);
            warn_repeating!(
                WarnKind::AuthRefused,
                "subscriber {}: wrong token; closing",
                ctx.peer
            );
            false
        }
    }
}

/// `SELECT n`: 0–15 accepted (pub/sub ignores it), as Redis's default 16 databases.
fn select(sess: &mut Session, input: &[u8], args: &[Range<usize>]) -> bool {
    if args.len() != 2 {
        resp::append_wrong_arity(sess.out(), "select");
        return false;
    }
    match string2ll(&input[args[1].clone()]) {
        None => {
            resp::append_error(sess.out(), b"ERR value is not an integer or out of range");
            false
        }
        Some(n @ 0..=15) => {
            sess.db = n as u8;
            resp::append_ok(sess.out());
            true
        }
        Some(n) if i32::try_from(n).is_err() => {
            resp::append_error(
                sess.out(),
                b"ERR value is out of range, value must between -2147483648 and 2147483647",
            );
            false
        }
        Some(_) => {
            resp::append_error(sess.out(), b"ERR DB index is out of range");
            false
        }
    }
}

/// The sections `INFO` knows, in Redis's order.
const SECTIONS: [&str; 3] = ["server", "clients", "persistence"];

/// `INFO [section …]`: `default`, `all`, `everything` or none give every
/// section; unknown sections give nothing (an empty text, as Redis).
fn info(sess: &mut Session, input: &[u8], args: &[Range<usize>], ctx: &CommandCtx<'_>) -> bool {
    let mut wanted = [args.len() == 1; 3];
    for r in &args[1..] {
        let a = &input[r.clone()];
        if ["default", "all", "everything"]
            .iter()
            .any(|n| resp::eq_ignore_case(a, n.as_bytes()))
        {
            wanted = [true; 3];
        }
        for (i, n) in SECTIONS.iter().enumerate() {
            wanted[i] |= resp::eq_ignore_case(a, n.as_bytes());
        }
    }
    let text = info_text(wanted, ctx);
    let proto = sess.proto;
    framing::append_verbatim_txt(sess.out(), proto, text.as_bytes());
    true
}

fn info_text(wanted: [bool; 3], ctx: &CommandCtx<'_>) -> String {
    let mut s = String::with_capacity(512);
    let mut section = |title: &str, body: &dyn Fn(&mut String)| {
        if !s.is_empty() {
            s.push_str("\r\n");
        }
        let _ = write!(s, "# {title}\r\n");
        body(&mut s);
    };
    let uptime = ctx.now_ns.saturating_sub(ctx.server.started_ns) / 1_000_000_000;
    if wanted[0] {
        section("Server", &|s| {
            let _ = write!(
                s,
                "redis_version:{REDIS_VERSION}\r\ntickfan_version:{}\r\nredis_mode:standalone\r\n\
                 os:{} {}\r\narch_bits:{}\r\nprocess_id:{}\r\ntcp_port:{}\r\n\
                 uptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\n",
                env!("CARGO_PKG_VERSION"),
                std::env::consts::OS,
                std::env::consts::ARCH,
                usize::BITS,
                std::process::id(),
                ctx.server.tcp_port,
                uptime / 86_400,
            );
        });
    }
    if wanted[1] {
        section("Clients", &|s| {
            let _ = write!(
                s,
                "connected_clients:{}\r\nmaxclients:{}\r\n",
                ctx.connected_clients, ctx.server.max_clients
            );
        });
    }
    if wanted[2] {
        section("Persistence", &|s| s.push_str("loading:0\r\n"));
    }
    s
}
