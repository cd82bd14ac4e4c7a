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
    use crate::model::order_reasons::DeadReason;
    use crate::order::gateway::codec::{
        write_ack, write_dead, write_done, write_fill, write_reject,
    };

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

    #[test]
    fn lines_that_are_not_replies_are_none() {
        for line in [
            "",
            "HELLO o1",
            "ACK",
            "FILL o1 n=x cum=1 amount=0.0000000 left=0",
            "REJECT o1 BUSY full",
            "DONE o1 MAYBE cum=1 attempts=1",
        ] {
            assert_eq!(Reply::parse(line), None, "{line}");
        }
        assert_eq!(Reply::parse("PONG\r"), Some(Reply::Pong));
        assert_eq!(Reply::Pong.id(), None);
    }
}
