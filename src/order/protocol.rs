//! The order protocol: text lines, one command or reply per line.
//!
//! Client → engine (`\n` or `\r\n`; fields separated by spaces):
//!
//! ```text
//! NEW <id> <symbol> <BUY|SELL> <qty> [ttl=<duration>]   a new order
//! REPLAY <id>                                           re-run a dead-lettered order
//! PING                                                  liveness: PONG
//! ```
//!
//! * `id`: the client order id, 1–36 bytes of `A-Z a-z 0-9 . _ : -`;
//! * `symbol`: 1–24 bytes of printable ASCII, no comma (as on the feed);
//! * `qty`: lots, decimal with at most 2 decimals (`0.01` … `1000000`);
//! * `ttl`: time to live from receipt: `500ms`, `2s`, or a bare number of ms.
//!
//! Engine → client, each reply on its own line, the order id second:
//!
//! ```text
//! ACK <id>                                              accepted: queued, not done yet
//! FILL <id> n=<fill_no> cum=<lots> amount=<amount> left=<lots>   absolute values, never deltas
//! DONE <id> <FILLED|PARTIAL|FAILED> cum=<lots> amount=<amount> attempts=<n>
//! DEAD <id> <reason> attempts=<n> [last=<what the bridge said>]
//! REJECT <id> <SYSTEM_BUSY|INVALID|DUPLICATE|EXPIRED> <detail…>
//! PONG
//! ```
//!
//! Every `NEW` gets exactly one of: `REJECT` (not accepted; the only reply),
//! or `ACK` and later exactly one terminal reply: `DONE`, `DEAD` or
//! `REJECT … EXPIRED`. `FILL`s come between `ACK` and `DONE`. A line whose
//! id cannot be read is rejected with id `-`.

use std::fmt::Write as _;
use std::time::Duration;

use crate::bridge::{Amount, Lots, LotsError, Side};

/// Longest client order id.
pub const MAX_ID_LEN: usize = 36;
/// Longest symbol.
pub const MAX_SYMBOL_LEN: usize = 24;
/// Longest time to live accepted.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

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
}

/// A parsed client line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// A new order.
    New(NewOrder<'a>),
    /// Re-run the dead-lettered order with this id.
    Replay(&'a str),
    /// Liveness check.
    Ping,
    /// A blank line (ignored, no reply).
    Blank,
}

/// Why a line was refused (the detail of `REJECT <id> INVALID`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvalidReason {
    /// Not `NEW`, `REPLAY` or `PING`.
    UnknownCommand,
    /// Fewer fields than the command needs.
    MissingField,
    /// More fields than the command takes.
    TooManyFields,
    /// Id empty, too long or with a forbidden byte.
    BadId,
    /// Symbol empty, too long or with a forbidden byte.
    BadSymbol,
    /// Side is neither BUY nor SELL.
    BadSide,
    /// Quantity not a decimal with ≤ 2 decimals, or too large.
    BadQuantity,
    /// Quantity zero or negative.
    NonPositiveQuantity,
    /// TTL not a duration, zero, or over a day.
    BadTtl,
    /// Over the line length limit.
    LineTooLong,
    /// Not UTF-8.
    InvalidUtf8,
    /// `REPLAY` of an id with no dead-lettered order.
    NotReplayable,
}

impl InvalidReason {
    /// Number of reasons.
    pub const COUNT: usize = 12;
    /// Every reason, in index order.
    pub const ALL: [InvalidReason; Self::COUNT] = [
        Self::UnknownCommand,
        Self::MissingField,
        Self::TooManyFields,
        Self::BadId,
        Self::BadSymbol,
        Self::BadSide,
        Self::BadQuantity,
        Self::NonPositiveQuantity,
        Self::BadTtl,
        Self::LineTooLong,
        Self::InvalidUtf8,
        Self::NotReplayable,
    ];

    /// Stable snake-case name (first word of the detail).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::UnknownCommand => "unknown_command",
            Self::MissingField => "missing_field",
            Self::TooManyFields => "too_many_fields",
            Self::BadId => "bad_id",
            Self::BadSymbol => "bad_symbol",
            Self::BadSide => "bad_side",
            Self::BadQuantity => "bad_quantity",
            Self::NonPositiveQuantity => "non_positive_quantity",
            Self::BadTtl => "bad_ttl",
            Self::LineTooLong => "line_too_long",
            Self::InvalidUtf8 => "invalid_utf8",
            Self::NotReplayable => "not_replayable",
        }
    }

    /// Index into per-reason arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
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
    if cmd.eq_ignore_ascii_case("REPLAY") {
        let Some(id) = f.next() else {
            return bad(
                InvalidReason::MissingField,
                "-",
                "usage: REPLAY <id>".into(),
            );
        };
        if !valid_id(id) {
            return bad(InvalidReason::BadId, "-", id_hint());
        }
        if f.next().is_some() {
            return bad(
                InvalidReason::TooManyFields,
                id,
                "usage: REPLAY <id>".into(),
            );
        }
        return Ok(Request::Replay(id));
    }
    if !cmd.eq_ignore_ascii_case("NEW") {
        let shown: String = cmd.chars().take(16).collect();
        return bad(
            InvalidReason::UnknownCommand,
            "-",
            format!("'{shown}' (commands: NEW, REPLAY, PING)"),
        );
    }
    const USAGE: &str = "usage: NEW <id> <symbol> <BUY|SELL> <qty> [ttl=<duration>]";
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
    let mut ttl = None;
    if let Some(opt) = f.next() {
        match opt.split_once('=') {
            Some((k, v)) if k.eq_ignore_ascii_case("ttl") => match parse_ttl(v) {
                Some(d) => ttl = Some(d),
                None => {
                    return bad(
                        InvalidReason::BadTtl,
                        id,
                        "ttl must be a positive duration up to 24h (500ms, 2s, or ms)".into(),
                    )
                }
            },
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
    }))
}

fn id_hint() -> String {
    format!("id must be 1-{MAX_ID_LEN} bytes of A-Z a-z 0-9 . _ : -")
}

/// Why a line was not accepted (`REJECT <id> <reason>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The queue is full (or the dedup store is): try again later.
    SystemBusy,
    /// The line is malformed or a field is invalid: do not resend as is.
    Invalid,
    /// This id was seen within the dedup retention.
    Duplicate,
    /// The TTL passed before the order could be sent (terminal for an accepted order).
    Expired,
}

impl RejectReason {
    /// Number of reasons.
    pub const COUNT: usize = 4;
    /// Every reason, in index order.
    pub const ALL: [RejectReason; Self::COUNT] = [
        Self::SystemBusy,
        Self::Invalid,
        Self::Duplicate,
        Self::Expired,
    ];

    /// Wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SystemBusy => "SYSTEM_BUSY",
            Self::Invalid => "INVALID",
            Self::Duplicate => "DUPLICATE",
            Self::Expired => "EXPIRED",
        }
    }

    /// Index into per-reason arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// How an executed order ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DoneStatus {
    /// The whole quantity.
    Filled,
    /// Part of it; the venue will not fill the rest.
    Partial,
    /// The venue took it but filled nothing.
    Failed,
}

impl DoneStatus {
    /// Number of statuses.
    pub const COUNT: usize = 3;
    /// Every status, in index order.
    pub const ALL: [DoneStatus; Self::COUNT] = [Self::Filled, Self::Partial, Self::Failed];

    /// Wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Filled => "FILLED",
            Self::Partial => "PARTIAL",
            Self::Failed => "FAILED",
        }
    }

    /// Index into per-status arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// From the filled and ordered quantities.
    pub fn of(filled: Lots, ordered: Lots) -> Self {
        if filled.0 == 0 {
            Self::Failed
        } else if filled < ordered {
            Self::Partial
        } else {
            Self::Filled
        }
    }
}

/// Why an accepted order was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeadReason {
    /// A bridge refused it permanently (400-like); never retried.
    BridgeRejected,
    /// It failed transiently on every attempt the retry policy allows.
    RetriesExhausted,
    /// It failed transiently and the delay queue was full.
    RetryQueueFull,
    /// The engine stopped while it waited for a retry.
    Shutdown,
}

impl DeadReason {
    /// Number of reasons.
    pub const COUNT: usize = 4;
    /// Every reason, in index order.
    pub const ALL: [DeadReason; Self::COUNT] = [
        Self::BridgeRejected,
        Self::RetriesExhausted,
        Self::RetryQueueFull,
        Self::Shutdown,
    ];

    /// Stable snake-case name (wire and DLQ).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BridgeRejected => "bridge_rejected",
            Self::RetriesExhausted => "retries_exhausted",
            Self::RetryQueueFull => "retry_queue_full",
            Self::Shutdown => "shutdown",
        }
    }

    /// Index into per-reason arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Appends `ACK <id>\n`.
pub fn write_ack(out: &mut Vec<u8>, id: &str) {
    line(out, format_args!("ACK {id}"));
}

/// Appends `REJECT <id> <reason> <detail>\n`.
pub fn write_reject(out: &mut Vec<u8>, id: &str, reason: RejectReason, detail: &str) {
    line(
        out,
        format_args!("REJECT {id} {} {detail}", reason.as_str()),
    );
}

/// Appends a `FILL` line.
pub fn write_fill(out: &mut Vec<u8>, id: &str, n: u32, cum: Lots, amount: Amount, left: Lots) {
    line(
        out,
        format_args!("FILL {id} n={n} cum={cum} amount={amount} left={left}"),
    );
}

/// Appends a `DONE` line.
pub fn write_done(
    out: &mut Vec<u8>,
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
pub fn write_dead(out: &mut Vec<u8>, id: &str, reason: DeadReason, attempts: u32, last: &str) {
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

fn line(out: &mut Vec<u8>, args: std::fmt::Arguments<'_>) {
    struct W<'a>(&'a mut Vec<u8>);
    impl std::fmt::Write for W<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.extend_from_slice(s.as_bytes());
            Ok(())
        }
    }
    let _ = W(out).write_fmt(args);
    out.push(b'\n');
}

/// A reply as a client reads it (tools and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `ACK <id>`.
    Ack {
        /// Order id.
        id: String,
    },
    /// `FILL …`.
    Fill {
        /// Order id.
        id: String,
        /// Fill number.
        n: u32,
        /// Cumulative lots (hundredths).
        cum: Lots,
        /// Cumulative amount.
        amount: Amount,
        /// Remaining lots.
        left: Lots,
    },
    /// `DONE …` (terminal).
    Done {
        /// Order id.
        id: String,
        /// How it ended.
        status: DoneStatus,
        /// Filled lots.
        cum: Lots,
        /// Attempts made.
        attempts: u32,
    },
    /// `DEAD …` (terminal).
    Dead {
        /// Order id.
        id: String,
        /// Reason name.
        reason: String,
        /// Attempts made.
        attempts: u32,
    },
    /// `REJECT …` (terminal).
    Reject {
        /// Order id (`-` if unknown).
        id: String,
        /// Reason.
        reason: RejectReason,
        /// Detail text.
        detail: String,
    },
    /// `PONG`.
    Pong,
}

impl Reply {
    /// Parses one reply line (without `\n`).
    pub fn parse(line: &str) -> Option<Reply> {
        let line = line.trim_end_matches('\r');
        let mut f = line.splitn(4, ' ');
        let kind = f.next()?;
        if kind == "PONG" {
            return Some(Reply::Pong);
        }
        let id = f.next()?.to_string();
        let kv = |rest: &str, key: &str| -> Option<String> {
            rest.split(' ')
                .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_string)
        };
        let rest: String = f.collect::<Vec<_>>().join(" ");
        let lots = |s: Option<String>| Lots::parse(&s?).ok().or(Some(Lots(0)));
        match kind {
            "ACK" => Some(Reply::Ack { id }),
            "FILL" => Some(Reply::Fill {
                id,
                n: kv(&rest, "n")?.parse().ok()?,
                cum: lots(kv(&rest, "cum"))?,
                amount: parse_amount(&kv(&rest, "amount")?)?,
                left: lots(kv(&rest, "left"))?,
            }),
            "DONE" => {
                let status = DoneStatus::ALL
                    .into_iter()
                    .find(|s| rest.starts_with(s.as_str()))?;
                Some(Reply::Done {
                    id,
                    status,
                    cum: lots(kv(&rest, "cum"))?,
                    attempts: kv(&rest, "attempts")?.parse().ok()?,
                })
            }
            "DEAD" => Some(Reply::Dead {
                id,
                reason: rest.split(' ').next()?.to_string(),
                attempts: kv(&rest, "attempts")?.parse().ok()?,
            }),
            "REJECT" => {
                let (reason, detail) = rest.split_once(' ').unwrap_or((&rest, ""));
                Some(Reply::Reject {
                    id,
                    reason: RejectReason::parse(reason)?,
                    detail: detail.to_string(),
                })
            }
            _ => None,
        }
    }

    /// The order id the reply is about (`None` for `PONG`).
    pub fn id(&self) -> Option<&str> {
        match self {
            Reply::Ack { id }
            | Reply::Fill { id, .. }
            | Reply::Done { id, .. }
            | Reply::Dead { id, .. }
            | Reply::Reject { id, .. } => Some(id),
            Reply::Pong => None,
        }
    }

    /// True for the replies that end an order (`DONE`, `DEAD`, `REJECT`).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Reply::Done { .. } | Reply::Dead { .. } | Reply::Reject { .. }
        )
    }
}

fn parse_amount(s: &str) -> Option<Amount> {
    let (i, f) = s.split_once('.')?;
    if f.len() != 7 {
        return None;
    }
    Some(Amount(
        i.parse::<u64>().ok()? * 10_000_000 + f.parse::<u64>().ok()?,
    ))
}

/// Formats a `NEW` line (tools and tests).
pub fn new_order_line(
    id: &str,
    symbol: &str,
    side: Side,
    qty: Lots,
    ttl: Option<Duration>,
) -> String {
    let mut s = format!("NEW {id} {symbol} {} {qty}", side.as_str());
    if let Some(t) = ttl {
        // Whole milliseconds as a bare number; anything finer in ns, so the
        // engine reads back exactly the TTL that was meant (found by fuzzing).
        if t.subsec_nanos() % 1_000_000 == 0 {
            let _ = write!(s, " ttl={}", t.as_millis());
        } else {
            let _ = write!(s, " ttl={}ns", t.as_nanos());
        }
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_orders_parse() {
        assert_eq!(
            parse_request(b"NEW o-1 EURUSD BUY 0.01\r"),
            Ok(Request::New(NewOrder {
                id: "o-1",
                symbol: "EURUSD",
                side: Side::Buy,
                qty: Lots(1),
                ttl: None
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
        assert_eq!(parse_request(b"PING"), Ok(Request::Ping));
        assert_eq!(parse_request(b"REPLAY o1"), Ok(Request::Replay("o1")));
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
            (b"NEW o1 EUR\xffUSD BUY 1", R::InvalidUtf8, "-"),
            (b"PING now", R::TooManyFields, "-"),
        ] {
            let e = parse_request(line).unwrap_err();
            assert_eq!(
                (e.reason, e.id),
                (reason, id),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        let long_id = format!("NEW {} X BUY 1", "a".repeat(MAX_ID_LEN + 1));
        assert_eq!(
            parse_request(long_id.as_bytes()).unwrap_err().reason,
            R::BadId
        );
    }

    #[test]
    fn replies_round_trip() {
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
        write_reject(
            &mut out,
            "o3",
            RejectReason::SystemBusy,
            "queue full (10000)",
        );
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "FILL o1 n=1 cum=0.40 amount=0.4340480 left=0.60");
        assert_eq!(
            lines[2],
            "DONE o1 PARTIAL cum=0.40 amount=0.4340480 attempts=2"
        );
        assert_eq!(lines[3], "DEAD o2 retries_exhausted attempts=5 last=outage");
        let parsed: Vec<Reply> = lines.iter().map(|l| Reply::parse(l).unwrap()).collect();
        assert_eq!(parsed[0], Reply::Ack { id: "o1".into() });
        assert_eq!(
            parsed[1],
            Reply::Fill {
                id: "o1".into(),
                n: 1,
                cum: Lots(40),
                amount: Amount(4_340_480),
                left: Lots(60)
            }
        );
        assert!(matches!(
            &parsed[2],
            Reply::Done {
                status: DoneStatus::Partial,
                attempts: 2,
                ..
            }
        ));
        assert!(
            matches!(&parsed[3], Reply::Dead { attempts: 5, reason, .. } if reason == "retries_exhausted")
        );
        assert!(
            matches!(&parsed[4], Reply::Reject { reason: RejectReason::SystemBusy, detail, .. } if detail == "queue full (10000)")
        );
        assert!(parsed[2].is_terminal() && !parsed[1].is_terminal());
        assert_eq!(
            new_order_line("a", "B", Side::Sell, Lots(5), None),
            "NEW a B SELL 0.05\n"
        );
    }
}

#[cfg(test)]
mod proptests {
    //! The parser never panics, and every valid order survives a round trip.
    use super::*;
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
                id: &id, symbol: &sym, side, qty: Lots(qty), ttl: ttl.map(Duration::from_millis),
            }));
        }
    }
}
