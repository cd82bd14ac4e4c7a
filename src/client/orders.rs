//! The client side of the order protocol: the `NEW` line a client sends
//! ([`new_order_line`]) and the replies it reads back ([`Reply`]).
//!
//! The grammar is documented with the server's codec
//! (`crate::order::gateway::codec`); this side is what tools and tests use to
//! speak it, and the engine itself never parses a reply.

use std::fmt::Write as _;
use std::time::Duration;

use crate::model::order_reasons::{DoneStatus, RejectReason};
use crate::model::units::{Amount, Lots, Side};

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
    /// `STATUS <id> <state> cum=… amount=… left=… attempts=…` (not terminal:
    /// it answers a question, it does not end the order).
    Status {
        /// Order id.
        id: String,
        /// Where the order is.
        state: OrderState,
        /// Filled lots.
        cum: Lots,
        /// Cumulative amount.
        amount: Amount,
        /// Remaining lots.
        left: Lots,
        /// Attempts so far.
        attempts: u32,
    },
    /// `PONG`.
    Pong,
}

/// The state a `STATUS` reply names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderState {
    /// `QUEUED`.
    Queued,
    /// `AT_BRIDGE`.
    AtBridge,
    /// `RETRY_WAIT`.
    RetryWait,
    /// `DONE <status>`.
    Done(DoneStatus),
    /// `DEAD <reason>`.
    Dead(String),
    /// `EXPIRED`.
    Expired,
    /// `UNKNOWN`: never seen, or past the dedup retention.
    Unknown,
}

impl OrderState {
    /// True for the states that end an order (`DONE`, `DEAD`, `EXPIRED`).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            OrderState::Done(_) | OrderState::Dead(_) | OrderState::Expired
        )
    }

    /// Reads the state from the start of `rest`; returns it and what follows.
    fn parse(rest: &str) -> Option<(OrderState, &str)> {
        let (word, after) = rest.split_once(' ').unwrap_or((rest, ""));
        let simple = match word {
            "QUEUED" => Some(OrderState::Queued),
            "AT_BRIDGE" => Some(OrderState::AtBridge),
            "RETRY_WAIT" => Some(OrderState::RetryWait),
            "EXPIRED" => Some(OrderState::Expired),
            "UNKNOWN" => Some(OrderState::Unknown),
            _ => None,
        };
        if let Some(st) = simple {
            return Some((st, after));
        }
        let (arg, after) = after.split_once(' ').unwrap_or((after, ""));
        match word {
            "DONE" => {
                let d = DoneStatus::ALL.into_iter().find(|s| s.as_str() == arg)?;
                Some((OrderState::Done(d), after))
            }
            "DEAD" if !arg.is_empty() && !arg.contains('=') => {
                Some((OrderState::Dead(arg.to_string()), after))
            }
            _ => None,
        }
    }
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
            "STATUS" => {
                let (state, nums) = OrderState::parse(&rest)?;
                Some(Reply::Status {
                    id,
                    state,
                    cum: lots(kv(nums, "cum"))?,
                    // `UNKNOWN` writes a bare `amount=0`.
                    amount: match kv(nums, "amount")?.as_str() {
                        "0" => Amount(0),
                        a => parse_amount(a)?,
                    },
                    left: lots(kv(nums, "left"))?,
                    attempts: kv(nums, "attempts")?.parse().ok()?,
                })
            }
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
            | Reply::Reject { id, .. }
            | Reply::Status { id, .. } => Some(id),
            Reply::Pong => None,
        }
    }

    /// True for the replies that end an order (`DONE`, `DEAD`, `REJECT`
    /// but a refused `CANCEL`'s).
    pub fn is_terminal(&self) -> bool {
        match self {
            Reply::Done { .. } | Reply::Dead { .. } => true,
            // A refused `CANCEL` says nothing of the order's end.
            Reply::Reject { reason, .. } => !reason.refuses_cancel(),
            _ => false,
        }
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

/// Formats a `STATUS` request (tools and tests).
pub fn status_line(id: &str) -> String {
    format!("STATUS {id}\n")
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
    fn cancel_answers_parse_and_only_canceled_ends_the_order() {
        let done = Reply::parse("DONE o1 CANCELED cum=0.00 amount=0.0000000 attempts=1").unwrap();
        assert!(matches!(
            done,
            Reply::Done {
                status: DoneStatus::Canceled,
                attempts: 1,
                ..
            }
        ));
        assert!(done.is_terminal());
        for (line, reason) in [
            ("REJECT o2 TOO_LATE at_bridge", RejectReason::TooLate),
            (
                "REJECT o3 UNKNOWN_ORDER no order",
                RejectReason::UnknownOrder,
            ),
            ("REJECT o4 ALREADY_DONE ended", RejectReason::AlreadyDone),
        ] {
            let r = Reply::parse(line).unwrap();
            assert!(matches!(&r, Reply::Reject { reason: got, .. } if *got == reason));
            assert!(!r.is_terminal(), "{line}: a refused CANCEL ends nothing");
        }
        let busy = Reply::parse("REJECT o5 SYSTEM_BUSY halted").unwrap();
        assert!(busy.is_terminal());
        let Some(Reply::Status { state, .. }) =
            Reply::parse("STATUS o1 DONE CANCELED cum=0.00 amount=0.0000000 left=1.00 attempts=0")
        else {
            panic!("STATUS DONE CANCELED parses")
        };
        assert_eq!(state, OrderState::Done(DoneStatus::Canceled));
    }

    #[test]
    fn lines_that_are_not_replies_are_none() {
        for line in [
            "",
            "HELLO o1",
            "ACK",
            "FILL o1 n=x cum=1 amount=0.0000000 left=0",
            "REJECT o1 BUSY full",
            "DONE o1 MAYBE cum=1 attempts=1",
            "STATUS o1 LOST cum=0 amount=0.0000000 left=0 attempts=0",
            "STATUS o1 DONE cum=0 amount=0.0000000 left=0 attempts=0",
            "STATUS o1 QUEUED cum=0 left=0 attempts=0",
        ] {
            assert_eq!(Reply::parse(line), None, "{line}");
        }
        assert_eq!(Reply::parse("PONG\r"), Some(Reply::Pong));
        assert_eq!(Reply::Pong.id(), None);
    }
}
