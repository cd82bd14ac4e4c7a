//! The order protocol, server side: text lines, one command or reply per
//! line. The gateway parses requests ([`parse_request`]) and writes replies
//! (`write_*`, into any [`BufMut`]: the gateway's connection buffer
//! directly, no copy between); the client side (the `NEW` encoder and the reply parser) is
//! `crate::client::orders`; the reasons are `crate::model::order_reasons`.
//!
//! Client → engine (`\n` or `\r\n`; fields separated by spaces):
//!
//! ```text
//! NEW <id> <symbol> <BUY|SELL> <qty> [ttl=<duration>] [acct=<account>]   a new order
//! REPLAY <id>                                           re-run a dead-lettered order
//! STATUS <id>                                           where an order is (any connection)
//! CANCEL <id>                                           cancel it if not yet at a bridge (any connection)
//! PING                                                  liveness: PONG
//! ```
//!
//! * `id`: the client order id, 1–36 bytes of `A-Z a-z 0-9 . _ : -`;
//! * `symbol`: 1–24 bytes of printable ASCII, no comma (as on the feed);
//! * `qty`: lots, decimal with at most 2 decimals (`0.01` … `1000000`);
//! * `ttl`: time to live from receipt: `500ms`, `2s`, or a bare number of ms;
//! * `acct`: the account, 1–32 bytes of `A-Z a-z 0-9 _ -`: orders of one
//!   (account, symbol) reach the bridges in admission order, one at a time
//!   (`acct.rs`). The options come in either order, each at most once.
//!
//! Engine → client, each reply on its own line, the order id second:
//!
//! ```text
//! ACK <id>                                              accepted: queued, not done yet
//! FILL <id> n=<fill_no> cum=<lots> amount=<amount> left=<lots>   absolute values, never deltas
//! DONE <id> <FILLED|PARTIAL|FAILED|CANCELED> cum=<lots> amount=<amount> attempts=<n>
//! DEAD <id> <reason> attempts=<n> [last=<what the bridge said>]
//! REJECT <id> <SYSTEM_BUSY|INVALID|DUPLICATE|EXPIRED> <detail…>
//! REJECT <id> <TOO_LATE|UNKNOWN_ORDER|ALREADY_DONE> <detail…>   a refused CANCEL (see cancel.rs)
//! STATUS <id> <state> cum=<lots> amount=<amount> left=<lots> attempts=<n>
//! PONG
//! ```
//!
//! Every `NEW` gets exactly one of: `REJECT` (not accepted; the only reply),
//! or `ACK` and later exactly one terminal reply: `DONE`, `DEAD` or
//! `REJECT … EXPIRED`. `FILL`s come between `ACK` and `DONE`. A line whose
//! id cannot be read is rejected with id `-`.
//!
//! `STATUS <id>` is answered with one `STATUS` line, `<state>` being one of
//! `QUEUED`, `AT_BRIDGE`, `RETRY_WAIT`, `DONE <FILLED|PARTIAL|FAILED>`,
//! `DEAD <reason>`, `EXPIRED`, `UNKNOWN` (never seen, or past the dedup
//! retention: then all numbers are 0); see `status.rs`.

use std::fmt::Write as _;
use std::time::Duration;

use bytes::BufMut;

use crate::model::order_reasons::{DeadReason, DoneStatus, InvalidReason, RejectReason};
use crate::model::units::{Amount, Lots, LotsError, Side};

/// Longest client order id.
pub(crate) const MAX_ID_LEN: usize = 36;
/// Longest symbol.
pub(crate) const MAX_SYMBOL_LEN: usize = 24;
/// Longest account (`acct=`).
pub(crate) const MAX_ACCT_LEN: usize = 32;
/// Longest time to live accepted.
pub(crate) const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// A parsed `NEW`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewOrder<'a> {
    /// Client order id.
    pub id: &'a str,
    /// Symbol.
    pub symbol: &'a str,
    /// Side.
    pub side: Side,
    /// Quantity.
    pub qty: Lots,
    /// Time to live, if given.
    pub ttl: Option<Duration>,
    /// Account (`acct=`), if given: per-(account, symbol) ordering.
    pub acct: Option<&'a str>,
}

/// A parsed client line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// A new order.
    New(NewOrder<'a>),
    /// Re-run the dead-lettered order with this id.
    Replay(&'a str),
    /// Where the order with this id is.
    Status(&'a str),
    /// Cancel the order with this id if it has not reached a bridge.
    Cancel(&'a str),
    /// Liveness check.
    Ping,
    /// A blank line (ignored, no reply).
    Blank,
}

/// A refused line: the reason, the id if one could be read, and a detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid<'a> {
    /// Why.
    pub reason: InvalidReason,
    /// The id (`-` when none could be read).
    pub id: &'a str,
    /// A human hint.
    pub detail: String,
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_ID_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

fn valid_symbol(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SYMBOL_LEN
        && s.bytes().all(|b| b.is_ascii_graphic() && b != b',')
}

fn parse_ttl(v: &str) -> Option<Duration> {
    let d = if v.bytes().all(|b| b.is_ascii_digit()) {
        Duration::from_millis(v.parse().ok()?)
    } else {
        humantime::parse_duration(v).ok()?
    };
    (!d.is_zero() && d <= MAX_TTL).then_some(d)
}

/// Parses one client line (without its `\n`; a trailing `\r` is ignored).
///
/// # Errors
/// [`Invalid`] with the reason, the id when it could be read, and a detail.
pub fn parse_request(line: &[u8]) -> Result<Request<'_>, Invalid<'_>> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Ok(text) = std::str::from_utf8(line) else {
        return Err(Invalid {
            reason: InvalidReason::InvalidUtf8,
            id: "-",
            detail: "line is not UTF-8".into(),
        });
    };
    let mut f = text.split_ascii_whitespace();
    let Some(cmd) = f.next() else {
        return Ok(Request::Blank);
    };
    let bad = |reason, id, detail: String| Err(Invalid { reason, id, detail });
    if cmd.eq_ignore_ascii_case("PING") {
        return match f.next() {
            None => Ok(Request::Ping),
            Some(_) => bad(
                InvalidReason::TooManyFields,
                "-",
                "PING takes no argument".into(),
            ),
        };
    }
    for (name, usage) in [
        ("REPLAY", "usage: REPLAY <id>"),
        ("STATUS", "usage: STATUS <id>"),
        ("CANCEL", "usage: CANCEL <id>"),
    ] {
        if !cmd.eq_ignore_ascii_case(name) {
            continue;
        }
        let Some(id) = f.next() else {
            return bad(InvalidReason::MissingField, "-", usage.into());
        };
        if !valid_id(id) {
            return bad(InvalidReason::BadId, "-", id_hint());
        }
        if f.next().is_some() {
            return bad(InvalidReason::TooManyFields, id, usage.into());
        }
        return Ok(match name {
            "REPLAY" => Request::Replay(id),
            "CANCEL" => Request::Cancel(id),
            _ => Request::Status(id),
        });
    }
    if !cmd.eq_ignore_ascii_case("NEW") {
        let shown: String = cmd.chars().take(16).collect();
        return bad(
            InvalidReason::UnknownCommand,
            "-",
            format!("'{shown}' (commands: NEW, CANCEL, REPLAY, STATUS, PING)"),
        );
    }
    const USAGE: &str =
        "usage: NEW <id> <symbol> <BUY|SELL> <qty> [ttl=<duration>] [acct=<account>]";
    let Some(id) = f.next() else {
        return bad(InvalidReason::MissingField, "-", USAGE.into());
    };
    if !valid_id(id) {
        return bad(InvalidReason::BadId, "-", id_hint());
    }
    let (Some(symbol), Some(side), Some(qty)) = (f.next(), f.next(), f.next()) else {
        return bad(InvalidReason::MissingField, id, USAGE.into());
    };
    if !valid_symbol(symbol) {
        return bad(
            InvalidReason::BadSymbol,
            id,
            "1-24 printable ASCII bytes, no comma".into(),
        );
    }
    let Some(side) = Side::parse(side) else {
        let shown: String = side.chars().take(16).collect();
        return bad(
            InvalidReason::BadSide,
            id,
            format!("'{shown}' (BUY or SELL)"),
        );
    };
    let qty = match Lots::parse(qty) {
        Ok(q) => q,
        Err(LotsError::NotPositive) => {
            return bad(
                InvalidReason::NonPositiveQuantity,
                id,
                "quantity must be positive".into(),
            )
        }
        Err(e) => return bad(InvalidReason::BadQuantity, id, e.to_string()),
    };
    let (mut ttl, mut acct) = (None, None);
    for opt in f.by_ref().take(2) {
        match opt.split_once('=') {
            Some((k, v)) if k.eq_ignore_ascii_case("ttl") && ttl.is_none() => match parse_ttl(v) {
                Some(d) => ttl = Some(d),
                None => {
                    return bad(
                        InvalidReason::BadTtl,
                        id,
                        "ttl must be a positive duration up to 24h (500ms, 2s, or ms)".into(),
                    )
                }
            },
            Some((k, v)) if k.eq_ignore_ascii_case("acct") && acct.is_none() => {
                if !valid_acct(v) {
                    return bad(
                        InvalidReason::BadAcct,
                        id,
                        format!("acct must be 1-{MAX_ACCT_LEN} bytes of A-Z a-z 0-9 _ -"),
                    );
                }
                acct = Some(v);
            }
            _ => return bad(InvalidReason::TooManyFields, id, USAGE.into()),
        }
    }
    if f.next().is_some() {
        return bad(InvalidReason::TooManyFields, id, USAGE.into());
    }
    Ok(Request::New(NewOrder {
        id,
        symbol,
        side,
        qty,
        ttl,
        acct,
    }))
}

/// Is `s` a valid `acct=` value (1–[`MAX_ACCT_LEN`] bytes of `A-Z a-z 0-9 _ -`)?
fn valid_acct(s: &str) -> bool {
    (1..=MAX_ACCT_LEN).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn id_hint() -> String {
    format!("id must be 1-{MAX_ID_LEN} bytes of A-Z a-z 0-9 . _ : -")
}

/// Appends `ACK <id>\n`.
pub(crate) fn write_ack(out: &mut impl BufMut, id: &str) {
    line(out, format_args!("ACK {id}"));
}

/// Appends `REJECT <id> <reason> <detail>\n`.
pub(crate) fn write_reject(out: &mut impl BufMut, id: &str, reason: RejectReason, detail: &str) {
    line(
        out,
        format_args!("REJECT {id} {} {detail}", reason.as_str()),
    );
}

/// Appends a `FILL` line.
pub(crate) fn write_fill(
    out: &mut impl BufMut,
    id: &str,
    n: u32,
    cum: Lots,
    amount: Amount,
    left: Lots,
) {
    line(
        out,
        format_args!("FILL {id} n={n} cum={cum} amount={amount} left={left}"),
    );
}

/// Appends a `DONE` line.
pub(crate) fn write_done(
    out: &mut impl BufMut,
    id: &str,
    status: DoneStatus,
    cum: Lots,
    amount: Amount,
    attempts: u32,
) {
    line(
        out,
        format_args!(
            "DONE {id} {} cum={cum} amount={amount} attempts={attempts}",
            status.as_str()
        ),
    );
}

/// Appends a `DEAD` line.
pub(crate) fn write_dead(
    out: &mut impl BufMut,
    id: &str,
    reason: DeadReason,
    attempts: u32,
    last: &str,
) {
    if last.is_empty() {
        line(
            out,
            format_args!("DEAD {id} {} attempts={attempts}", reason.as_str()),
        );
    } else {
        line(
            out,
            format_args!(
                "DEAD {id} {} attempts={attempts} last={last}",
                reason.as_str()
            ),
        );
    }
}

fn line<B: BufMut>(out: &mut B, args: std::fmt::Arguments<'_>) {
    struct W<'a, B>(&'a mut B);
    impl<B: BufMut> std::fmt::Write for W<'_, B> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.put_slice(s.as_bytes());
            Ok(())
        }
    }
    let _ = W(out).write_fmt(args);
    out.put_u8(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::orders::new_order_line;

    #[test]
    fn new_orders_parse() {
        assert_eq!(
            parse_request(b"NEW o-1 EURUSD BUY 0.01\r"),
            Ok(Request::New(NewOrder {
                id: "o-1",
                symbol: "EURUSD",
                side: Side::Buy,
                qty: Lots(1),
                ttl: None,
                acct: None,
            }))
        );
        let Ok(Request::New(o)) = parse_request(b"new o2  GBPUSD   sell 2.5 ttl=1500ms") else {
            panic!()
        };
        assert_eq!(
            (o.side, o.qty, o.ttl),
            (Side::Sell, Lots(250), Some(Duration::from_millis(1500)))
        );
        // Regression (fuzzing): a sub-millisecond TTL survives the encoder.
        let exact = Duration::from_micros(5_011_100);
        let line = new_order_line("o4", "X", Side::Buy, Lots(1), Some(exact));
        let Ok(Request::New(o)) = parse_request(line.trim_end().as_bytes()) else {
            panic!("{line}")
        };
        assert_eq!(o.ttl, Some(exact));
        let Ok(Request::New(o)) = parse_request(b"NEW o3 X BUY 1 ttl=250") else {
            panic!()
        };
        assert_eq!(o.ttl, Some(Duration::from_millis(250)));
        let Ok(Request::New(o)) = parse_request(b"NEW o5 X BUY 1 acct=Fund_7-a ttl=2s") else {
            panic!()
        };
        assert_eq!(
            (o.acct, o.ttl),
            (Some("Fund_7-a"), Some(Duration::from_secs(2)))
        );
        let Ok(Request::New(o)) = parse_request(b"NEW o6 X BUY 1 ACCT=a") else {
            panic!()
        };
        assert_eq!((o.acct, o.ttl), (Some("a"), None));
        assert_eq!(parse_request(b"PING"), Ok(Request::Ping));
        assert_eq!(parse_request(b"REPLAY o1"), Ok(Request::Replay("o1")));
        assert_eq!(parse_request(b"status o-9\r"), Ok(Request::Status("o-9")));
        assert_eq!(parse_request(b"CANCEL o-9"), Ok(Request::Cancel("o-9")));
        assert_eq!(parse_request(b"cancel o1\r"), Ok(Request::Cancel("o1")));
        assert_eq!(parse_request(b"  \r"), Ok(Request::Blank));
    }

    #[test]
    fn every_bad_field_has_its_reason() {
        use InvalidReason as R;
        for (line, reason, id) in [
            (&b"HELLO"[..], R::UnknownCommand, "-"),
            (b"NEW", R::MissingField, "-"),
            (b"NEW o1 EURUSD BUY", R::MissingField, "o1"),
            (b"NEW o/1 EURUSD BUY 1", R::BadId, "-"),
            (b"NEW o1 EUR,USD BUY 1", R::BadSymbol, "o1"),
            (b"NEW o1 EURUSD HOLD 1", R::BadSide, "o1"),
            (b"NEW o1 EURUSD BUY abc", R::BadQuantity, "o1"),
            (b"NEW o1 EURUSD BUY 0.001", R::BadQuantity, "o1"),
            (b"NEW o1 EURUSD BUY 0", R::NonPositiveQuantity, "o1"),
            (b"NEW o1 EURUSD BUY -3", R::NonPositiveQuantity, "o1"),
            (b"NEW o1 EURUSD BUY 1 ttl=0", R::BadTtl, "o1"),
            (b"NEW o1 EURUSD BUY 1 ttl=soon", R::BadTtl, "o1"),
            (b"NEW o1 EURUSD BUY 1 ttl=1s extra", R::TooManyFields, "o1"),
            (b"NEW o1 EURUSD BUY 1 color=red", R::TooManyFields, "o1"),
            (b"NEW o1 EURUSD BUY 1 acct=", R::BadAcct, "o1"),
            (b"NEW o1 EURUSD BUY 1 acct=a.b", R::BadAcct, "o1"),
            (b"NEW o1 EURUSD BUY 1 acct=a acct=b", R::TooManyFields, "o1"),
            (
                b"NEW o1 EURUSD BUY 1 acct=a ttl=1s x",
                R::TooManyFields,
                "o1",
            ),
            (b"NEW o1 EUR\xffUSD BUY 1", R::InvalidUtf8, "-"),
            (b"PING now", R::TooManyFields, "-"),
            (b"STATUS", R::MissingField, "-"),
            (b"STATUS o/1", R::BadId, "-"),
            (b"STATUS o1 o2", R::TooManyFields, "o1"),
            (b"CANCEL", R::MissingField, "-"),
            (b"CANCEL o/1", R::BadId, "-"),
            (b"CANCEL o1 now", R::TooManyFields, "o1"),
            (b"CANCEL o1 qty=3", R::TooManyFields, "o1"),
        ] {
            let e = parse_request(line).unwrap_err();
            assert_eq!(
                (e.reason, e.id),
                (reason, id),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        let long_acct = format!("NEW o1 X BUY 1 acct={}", "a".repeat(MAX_ACCT_LEN + 1));
        assert_eq!(
            parse_request(long_acct.as_bytes()).unwrap_err().reason,
            R::BadAcct
        );
        let long_id = format!("NEW {} X BUY 1", "a".repeat(MAX_ID_LEN + 1));
        assert_eq!(
            parse_request(long_id.as_bytes()).unwrap_err().reason,
            R::BadId
        );
    }

    #[test]
    fn replies_are_written_as_documented() {
        let mut out = Vec::new();
        write_ack(&mut out, "o1");
        write_fill(&mut out, "o1", 1, Lots(40), Amount(4_340_480), Lots(60));
        write_done(
            &mut out,
            "o1",
            DoneStatus::Partial,
            Lots(40),
            Amount(4_340_480),
            2,
        );
        write_dead(&mut out, "o2", DeadReason::RetriesExhausted, 5, "outage");
        write_dead(&mut out, "o4", DeadReason::Shutdown, 1, "");
        write_reject(
            &mut out,
            "o3",
            RejectReason::SystemBusy,
            "queue full (10000)",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ACK o1\n\
             FILL o1 n=1 cum=0.40 amount=0.4340480 left=0.60\n\
             DONE o1 PARTIAL cum=0.40 amount=0.4340480 attempts=2\n\
             DEAD o2 retries_exhausted attempts=5 last=outage\n\
             DEAD o4 shutdown attempts=1\n\
             REJECT o3 SYSTEM_BUSY queue full (10000)\n"
        );
    }
}

#[cfg(test)]
mod proptests {
    //! The parser never panics, and every valid order survives a round trip.
    use super::*;
    use crate::client::orders::new_order_line;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics(line in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = parse_request(&line);
        }

        #[test]
        fn valid_orders_round_trip(
            id in "[A-Za-z0-9._:-]{1,36}", sym in "[A-Z]{1,24}", buy in any::<bool>(),
            qty in 1u64..100_000_000, ttl in proptest::option::of(1u64..86_400_000),
        ) {
            let side = if buy { Side::Buy } else { Side::Sell };
            let line = new_order_line(&id, &sym, side, Lots(qty), ttl.map(Duration::from_millis));
            let parsed = parse_request(line.trim_end().as_bytes()).unwrap();
            prop_assert_eq!(parsed, Request::New(NewOrder {
                id: &id, symbol: &sym, side, qty: Lots(qty), ttl: ttl.map(Duration::from_millis), acct: None,
            }));
        }
    }
}
