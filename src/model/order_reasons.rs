//! The order path's reasons: why a line was refused ([`InvalidReason`]), why
//! an order was not accepted ([`RejectReason`]), how an executed order ended
//! ([`DoneStatus`]) and why an accepted one was dead-lettered
//! ([`DeadReason`]).
//!
//! Each is a closed set with a stable wire or label name and an index, so the
//! gateway, the workers, the fill thread, the metrics and the clients all
//! speak the same words; none of them owns the vocabulary.

use super::units::Lots;

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
    /// `acct=` not 1–32 bytes of `A-Z a-z 0-9 _ -`.
    BadAcct,
}

impl InvalidReason {
    /// Number of reasons.
    pub const COUNT: usize = 13;
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
        Self::BadAcct,
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
            Self::BadAcct => "bad_acct",
        }
    }

    /// Index into per-reason arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
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
    /// `CANCEL` of an order already at a bridge: it ends as it would have.
    TooLate,
    /// `CANCEL` of an id never accepted (or past the dedup retention, or not `ACK`ed yet).
    UnknownOrder,
    /// `CANCEL` of an order that has ended (or is being cancelled).
    AlreadyDone,
}

impl RejectReason {
    /// Number of reasons.
    pub const COUNT: usize = 7;
    /// Every reason, in index order.
    pub const ALL: [RejectReason; Self::COUNT] = [
        Self::SystemBusy,
        Self::Invalid,
        Self::Duplicate,
        Self::Expired,
        Self::TooLate,
        Self::UnknownOrder,
        Self::AlreadyDone,
    ];

    /// Wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SystemBusy => "SYSTEM_BUSY",
            Self::Invalid => "INVALID",
            Self::Duplicate => "DUPLICATE",
            Self::Expired => "EXPIRED",
            Self::TooLate => "TOO_LATE",
            Self::UnknownOrder => "UNKNOWN_ORDER",
            Self::AlreadyDone => "ALREADY_DONE",
        }
    }

    /// Index into per-reason arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Is this the answer to a refused `CANCEL` (not an order's end)?
    pub const fn refuses_cancel(self) -> bool {
        matches!(self, Self::TooLate | Self::UnknownOrder | Self::AlreadyDone)
    }

    /// From its wire name (`SYSTEM_BUSY`, …).
    pub fn parse(s: &str) -> Option<Self> {
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
    /// Cancelled (`CANCEL`) before it reached a bridge; never sent.
    Canceled,
}

impl DoneStatus {
    /// Number of statuses.
    pub const COUNT: usize = 4;
    /// Every status, in index order.
    pub const ALL: [DoneStatus; Self::COUNT] =
        [Self::Filled, Self::Partial, Self::Failed, Self::Canceled];

    /// Wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Filled => "FILLED",
            Self::Partial => "PARTIAL",
            Self::Failed => "FAILED",
            Self::Canceled => "CANCELED",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn distinct(names: Vec<&str>) -> usize {
        let mut names = names;
        names.sort_unstable();
        names.dedup();
        names.len()
    }

    #[test]
    fn every_set_is_in_index_order_with_distinct_names() {
        for (i, r) in InvalidReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        for (i, r) in RejectReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert_eq!(RejectReason::parse(r.as_str()), Some(*r));
        }
        for (i, r) in DoneStatus::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        for (i, r) in DeadReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let names = |v: Vec<&'static str>| distinct(v);
        assert_eq!(
            names(InvalidReason::ALL.iter().map(|r| r.as_str()).collect()),
            InvalidReason::COUNT
        );
        assert_eq!(
            names(RejectReason::ALL.iter().map(|r| r.as_str()).collect()),
            RejectReason::COUNT
        );
        assert_eq!(
            names(DoneStatus::ALL.iter().map(|r| r.as_str()).collect()),
            DoneStatus::COUNT
        );
        assert_eq!(
            names(DeadReason::ALL.iter().map(|r| r.as_str()).collect()),
            DeadReason::COUNT
        );
        assert_eq!(RejectReason::parse("BUSY"), None);
    }

    #[test]
    fn done_status_follows_the_filled_quantity() {
        assert_eq!(DoneStatus::of(Lots(0), Lots(100)), DoneStatus::Failed);
        assert_eq!(DoneStatus::of(Lots(40), Lots(100)), DoneStatus::Partial);
        assert_eq!(DoneStatus::of(Lots(100), Lots(100)), DoneStatus::Filled);
    }
}
