//! Why a feed line was refused: the named reasons a poison tick is
//! dead-lettered and counted under.
//!
//! A poison line is never retried: it goes to the DLQ once with its reason and
//! the stream moves on at the next line.

/// The reason a feed line was dead-lettered. Each variant is a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PoisonReason {
    /// Not exactly six comma-separated fields.
    WrongFieldCount = 0,
    /// One of the six fields is empty.
    EmptyField,
    /// A number that is not `digits` or `digits.digits`, or too many digits.
    BadNumber,
    /// `bid` or `ask` is zero or negative.
    NonPositivePrice,
    /// `bid_qty` or `ask_qty` is negative.
    NegativeQuantity,
    /// Symbol longer than 24 bytes, or holding a byte outside printable ASCII.
    BadSymbol,
    /// No newline within the maximum line length; the reader skipped to the next newline.
    LineTooLong,
    /// The line is not valid UTF-8.
    InvalidUtf8,
    /// A new symbol arrived when the configured maximum number of symbols was reached.
    SymbolLimit,
    /// The connection closed in the middle of a line (no final newline).
    TruncatedAtEof,
}

impl PoisonReason {
    /// Number of reasons (size of a per-reason counter array).
    pub const COUNT: usize = 10;

    /// Every reason, in counter-index order.
    pub const ALL: [PoisonReason; Self::COUNT] = [
        PoisonReason::WrongFieldCount,
        PoisonReason::EmptyField,
        PoisonReason::BadNumber,
        PoisonReason::NonPositivePrice,
        PoisonReason::NegativeQuantity,
        PoisonReason::BadSymbol,
        PoisonReason::LineTooLong,
        PoisonReason::InvalidUtf8,
        PoisonReason::SymbolLimit,
        PoisonReason::TruncatedAtEof,
    ];

    /// Stable snake-case name, used in reports, DLQ records and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            PoisonReason::WrongFieldCount => "wrong_field_count",
            PoisonReason::EmptyField => "empty_field",
            PoisonReason::BadNumber => "bad_number",
            PoisonReason::NonPositivePrice => "non_positive_price",
            PoisonReason::NegativeQuantity => "negative_quantity",
            PoisonReason::BadSymbol => "bad_symbol",
            PoisonReason::LineTooLong => "line_too_long",
            PoisonReason::InvalidUtf8 => "invalid_utf8",
            PoisonReason::SymbolLimit => "symbol_limit",
            PoisonReason::TruncatedAtEof => "truncated_at_eof",
        }
    }

    /// Index into a per-reason counter array.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for PoisonReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_index_order_and_names_are_distinct() {
        for (i, r) in PoisonReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let mut names: Vec<_> = PoisonReason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), PoisonReason::COUNT);
    }
}
