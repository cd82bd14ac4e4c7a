//! `CLIENT SETNAME|GETNAME|SETINFO|ID|INFO|LIST`: what stock clients send
//! to name themselves and what tools read back, answered as Redis 7 does
//! (`SETINFO`, new in 7.2, as 7.2 does).
//!
//! `CLIENT LIST` lists only the calling connection: the publisher answers
//! from that connection's state (the admin endpoint lists every subscriber).
//! Other subcommands (`KILL`, `PAUSE`, `TRACKING`…) get Redis's
//! unknown-subcommand error.
//!
//! Single owner: the publisher thread (called from [`super::housekeeping`]).

use std::fmt::Write as _;
use std::ops::Range;

use crate::protocol::resp::framing;
use crate::protocol::resp::{self, string2ll};
use crate::publish::commands::CommandCtx;
use crate::publish::housekeeping::{valid_attr, BAD_NAME};
use crate::publish::session::Session;

/// `CLIENT <subcommand> …` (the subcommands stock clients send).
pub(crate) fn client(
    sess: &mut Session,
    input: &[u8],
    args: &[Range<usize>],
    ctx: &CommandCtx<'_>,
) -> bool {
    let arg = |i: usize| &input[args[i].clone()];
    if args.len() < 2 {
        resp::append_wrong_arity(sess.out(), "client");
        return false;
    }
    let sub = arg(1);
    let is = |n: &[u8]| resp::eq_ignore_case(sub, n);
    // (fullname, Redis arity: n exact, -n at least n)
    let (fullname, arity): (&str, i32) = if is(b"setname") {
        ("client|setname", 3)
    } else if is(b"getname") {
        ("client|getname", 2)
    } else if is(b"setinfo") {
        ("client|setinfo", 4)
    } else if is(b"id") {
        ("client|id", 2)
    } else if is(b"info") {
        ("client|info", 2)
    } else if is(b"list") {
        ("client|list", -2)
    } else {
        resp::append_unknown_subcommand(sess.out(), arg(0), sub);
        return false;
    };
    let argc = args.len() as i32;
    if (arity > 0 && argc != arity) || (arity < 0 && argc < -arity) {
        resp::append_wrong_arity(sess.out(), fullname);
        return false;
    }
    match fullname {
        "client|setname" => {
            let n = arg(2);
            if !valid_attr(n) {
                resp::append_error(sess.out(), BAD_NAME);
                return false;
            }
            sess.name = (!n.is_empty()).then(|| n.into());
            resp::append_ok(sess.out());
        }
        "client|getname" => {
            let proto = sess.proto;
            match sess.name.clone() {
                Some(n) => resp::append_bulk(sess.out(), &n),
                None => framing::append_null(sess.out(), proto),
            }
        }
        "client|setinfo" => {
            let (attr, val) = (arg(2), arg(3));
            let lib_name = resp::eq_ignore_case(attr, b"lib-name");
            if !lib_name && !resp::eq_ignore_case(attr, b"lib-ver") {
                let mut msg = b"ERR Unrecognized option '".to_vec();
                msg.extend_from_slice(attr);
                msg.push(b'\'');
                resp::append_error(sess.out(), &msg);
                return false;
            }
            if !valid_attr(val) {
                let mut msg = b"ERR ".to_vec();
                msg.extend_from_slice(attr);
                msg.extend_from_slice(b" cannot contain spaces, newlines or special characters.");
                resp::append_error(sess.out(), &msg);
                return false;
            }
            let v = (!val.is_empty()).then(|| val.into());
            if lib_name {
                sess.lib_name = v;
            } else {
                sess.lib_ver = v;
            }
            resp::append_ok(sess.out());
        }
        "client|id" => {
            let id = sess.id as i64;
            resp::append_integer(sess.out(), id);
        }
        "client|info" => {
            let line = info_line(sess, ctx, "client|info");
            let proto = sess.proto;
            framing::append_verbatim_txt(sess.out(), proto, line.as_bytes());
        }
        _ => return client_list(sess, input, args, ctx),
    }
    true
}

/// `CLIENT LIST [TYPE normal|pubsub] [ID id …]`: the calling connection's
/// line when it matches, else an empty text.
fn client_list(
    sess: &mut Session,
    input: &[u8],
    args: &[Range<usize>],
    ctx: &CommandCtx<'_>,
) -> bool {
    let arg = |i: usize| &input[args[i].clone()];
    let mut shown = true;
    let mut j = 2;
    while j < args.len() {
        let opt = arg(j);
        if resp::eq_ignore_case(opt, b"type") && j + 1 < args.len() {
            let t = arg(j + 1);
            let pubsub = sess.subscription_count() > 0;
            if resp::eq_ignore_case(t, b"pubsub") {
                shown &= pubsub;
            } else if resp::eq_ignore_case(t, b"normal") {
                shown &= !pubsub;
            } else if resp::eq_ignore_case(t, b"master") || resp::eq_ignore_case(t, b"replica") {
                shown = false;
            } else {
                let mut msg = b"ERR Unknown client type '".to_vec();
                msg.extend_from_slice(t);
                msg.push(b'\'');
                resp::append_error(sess.out(), &msg);
                return false;
            }
            j += 2;
        } else if resp::eq_ignore_case(opt, b"id") && j + 1 < args.len() {
            let mut any = false;
            for k in j + 1..args.len() {
                match string2ll(arg(k)) {
                    Some(id) if id > 0 => any |= id as u64 == sess.id,
                    _ => {
                        resp::append_error(sess.out(), b"ERR Invalid client ID");
                        return false;
                    }
                }
            }
            shown &= any;
            j = args.len();
        } else {
            resp::append_error(sess.out(), b"ERR syntax error");
            return false;
        }
    }
    let text = if shown {
        info_line(sess, ctx, "client|list")
    } else {
        String::new()
    };
    let proto = sess.proto;
    framing::append_verbatim_txt(sess.out(), proto, text.as_bytes());
    true
}

/// One `CLIENT INFO` / `CLIENT LIST` line in Redis 7.2's field order (the
/// buffer figures Redis has and tickfan does not are 0).
fn info_line(sess: &Session, ctx: &CommandCtx<'_>, cmd: &str) -> String {
    let show = |v: &Option<Box<[u8]>>| {
        v.as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let flags = if sess.subscription_count() > 0 {
        "P"
    } else {
        "N"
    };
    let mut s = String::with_capacity(320);
    let _ = writeln!(
        s,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={} psub={} \
         ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl={} oll=0 \
         omem=0 tot-mem=0 events=r cmd={cmd} user=default redir=-1 resp={} lib-name={} lib-ver={}",
        sess.id,
        ctx.peer,
        ctx.server.laddr,
        ctx.fd,
        show(&sess.name),
        ctx.now_ns.saturating_sub(sess.created_ns) / 1_000_000_000,
        ctx.now_ns.saturating_sub(sess.last_cmd_ns) / 1_000_000_000,
        sess.db,
        sess.channels.len(),
        sess.patterns.len(),
        sess.buf.buffered(),
        sess.proto.version(),
        show(&sess.lib_name),
        show(&sess.lib_ver),
    );
    s
}
