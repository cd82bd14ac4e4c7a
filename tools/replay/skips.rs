//! Bad input in a replay file: why a record was skipped, what the operator
//! is told, and the tally the summary prints.
//!
//! A record (a DBN record, a Tardis row, a line of a compressed tickfan CSV
//! file) that cannot become a quote is a [`Skip`]: one line on stderr,
//! `replay: FILE: record N: reason (detail)` (`line N` for the text
//! formats), then, per `--on-error`, the replay goes on at the next record
//! (`skip`, the default) or stops (`stop`, exit 1). Some skips end the file
//! however the flag is set, because nothing after them can be read: the
//! stream is truncated or corrupt (reasons `truncated` and `corrupt`).
//!
//! Like the engine's distinct-error log, a reason is written out for its
//! first [`SHOWN_PER_REASON`] records of a run, then only counted: a file
//! with a million bad rows does not print a million lines. The summary has
//! every count.

use std::fmt;

/// Why a record was skipped. The names (`as_str`) are the words the
/// summary and the docs use (`docs/src/replay-formats.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The file ends inside a record or inside a compressed frame (a
    /// `.zst`/`.gz` cut short, a DBN record missing its tail). Ends the file.
    Truncated,
    /// The compressed data or the DBN framing cannot be read further (a
    /// bad checksum, a record length that cannot be). Ends the file.
    Corrupt,
    /// A DBN record type this build does not know (a newer DBN version's
    /// record); the record is skipped by its length.
    UnknownRecord,
    /// A known DBN record that is not a quote (a trade, a definition, a
    /// status…) in a file whose metadata names no single schema.
    NotAQuote,
    /// The bid or the ask price is DBN's `UNDEF_PRICE` (an empty side).
    UndefinedPrice,
    /// The chosen timestamp is DBN's `UNDEF_TIMESTAMP`.
    UndefinedTimestamp,
    /// The bid or the ask price is zero or negative (the feed refuses it).
    NonPositivePrice,
    /// The symbol is not one tickfan takes (1–24 printable ASCII bytes, no
    /// comma); `--symbol-map` can rename it.
    BadSymbol,
    /// A Tardis row lacks a field (empty, or fewer columns than the header).
    MissingField,
    /// A Tardis field that is not a number of the kind its column holds, or
    /// a row with more fields than the header.
    BadField,
}

impl Reason {
    /// Every reason, in the summary's order.
    pub const ALL: [Reason; 10] = [
        Reason::Truncated,
        Reason::Corrupt,
        Reason::UnknownRecord,
        Reason::NotAQuote,
        Reason::UndefinedPrice,
        Reason::UndefinedTimestamp,
        Reason::NonPositivePrice,
        Reason::BadSymbol,
        Reason::MissingField,
        Reason::BadField,
    ];

    /// The reason's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Truncated => "truncated",
            Reason::Corrupt => "corrupt",
            Reason::UnknownRecord => "unknown_record",
            Reason::NotAQuote => "not_a_quote",
            Reason::UndefinedPrice => "undefined_price",
            Reason::UndefinedTimestamp => "undefined_timestamp",
            Reason::NonPositivePrice => "non_positive_price",
            Reason::BadSymbol => "bad_symbol",
            Reason::MissingField => "missing_field",
            Reason::BadField => "bad_field",
        }
    }

    fn index(self) -> usize {
        Reason::ALL.iter().position(|r| *r == self).expect("listed")
    }
}

/// Whether the unit of a file is a binary record or a text line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A DBN record, counted from 1 after the metadata (record 0).
    Record,
    /// A line of a text file, counted from 1 (the header is line 1).
    Line,
}

/// One record that did not become a quote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// Record or line.
    pub unit: Unit,
    /// Its number in the file (see [`Unit`]).
    pub number: u64,
    /// Why.
    pub reason: Reason,
    /// What exactly (the field, the value, the decoder's words).
    pub detail: String,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            Unit::Record => "record",
            Unit::Line => "line",
        };
        write!(f, "{unit} {}: {}", self.number, self.reason.as_str())?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

/// What `--on-error` asks for when a record is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnError {
    /// Count it, say it (the first few of each reason), go on.
    Skip,
    /// Say it and stop the replay (exit 1 after the summary).
    Stop,
}

/// Lines written per reason before the rest are only counted.
pub const SHOWN_PER_REASON: u64 = 10;

/// The tally of skipped records by reason. Single owner (the sending
/// thread).
#[derive(Debug, Clone, Default)]
pub struct Skips {
    counts: [u64; Reason::ALL.len()],
}

impl Skips {
    /// Counts `skip`; returns the line to print for it (`None` past
    /// [`SHOWN_PER_REASON`] of its reason, the note after the last one
    /// shown says so).
    pub fn count(&mut self, file: &str, skip: &Skip) -> Option<String> {
        let n = &mut self.counts[skip.reason.index()];
        *n += 1;
        match *n {
            k if k < SHOWN_PER_REASON => Some(format!("replay: {file}: {skip}")),
            SHOWN_PER_REASON => Some(format!(
                "replay: {file}: {skip} (further {} records are counted, not shown)",
                skip.reason.as_str()
            )),
            _ => None,
        }
    }

    /// Records skipped, all reasons.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Records skipped for `reason`.
    pub fn of(&self, reason: Reason) -> u64 {
        self.counts[reason.index()]
    }
}

impl fmt::Display for Skips {
    /// `truncated 1, missing_field 2` (reasons with a count only).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for r in Reason::ALL {
            let n = self.of(r);
            if n > 0 {
                if !first {
                    f.write_str(", ")?;
                }
                write!(f, "{} {n}", r.as_str())?;
                first = false;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(reason: Reason) -> Skip {
        Skip {
            unit: Unit::Line,
            number: 7,
            reason,
            detail: "bid_price".into(),
        }
    }

    #[test]
    fn a_skip_is_one_line_naming_file_place_and_reason() {
        let mut s = Skips::default();
        let line = s.count("q.csv.gz", &skip(Reason::MissingField)).unwrap();
        assert_eq!(line, "replay: q.csv.gz: line 7: missing_field (bid_price)");
        assert_eq!(s.to_string(), "missing_field 1");
    }

    #[test]
    fn lines_are_bounded_per_reason_and_counts_are_not() {
        let mut s = Skips::default();
        let shown = (0..100)
            .filter_map(|_| s.count("f", &skip(Reason::BadField)))
            .count() as u64;
        assert_eq!(shown, SHOWN_PER_REASON);
        assert!(s.count("f", &skip(Reason::Truncated)).is_some());
        assert_eq!(s.total(), 101);
        assert_eq!(s.to_string(), "truncated 1, bad_field 100");
    }
}
