//! Tardis.dev CSV, data types `quotes` and `book_ticker`, plain or `.gz`.
//!
//! The columns, as Tardis documents them
//! (<https://docs.tardis.dev/downloadable-csv-files/data-types#quotes> and
//! `#book_ticker`; both data types share them):
//!
//! ```text
//! exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount
//! binance,BTCUSDT,1585699201147000,1585699201270777,0.5,6423.1,6422.9,1.2
//! ```
//!
//! `timestamp` is the exchange's time, `local_timestamp` Tardis's arrival
//! time, both in microseconds since the epoch (UTC); decimals use `.`. The
//! columns are found by name in the header, so their order does not
//! matter. A row becomes the quote
//! `ts_ns,exchange:symbol,bid_price,ask_price,bid_amount,ask_amount`, the
//! numbers passed through digit for digit (no float rounding) and the
//! timestamp (`--ts`) times 1000. Each built line is checked with the
//! feed's own parser, so a row that becomes a line the engine would
//! dead-letter is skipped here instead, with the column at fault.

use std::io::{BufRead, BufReader};

use tickfan::error::Failure;
use tickfan::feed::parse::parse_line;
use tickfan::model::poison::PoisonReason;

use super::skips::{Reason, Skip, Unit};
use super::source::{DecodeOptions, Step, Stream, TsField, READ_BUF};
use super::symbol_map::{valid_symbol, SymbolMap};

/// The columns of Tardis's `quotes` and `book_ticker` files, in their order.
pub const HEADER: &str =
    "exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount";

/// The columns a quote needs, by name.
const NAMES: [&str; 8] = [
    "exchange",
    "symbol",
    "timestamp",
    "local_timestamp",
    "ask_amount",
    "ask_price",
    "bid_price",
    "bid_amount",
];
const EXCHANGE: usize = 0;
const SYMBOL: usize = 1;
const TIMESTAMP: usize = 2;
const LOCAL_TIMESTAMP: usize = 3;
const ASK_AMOUNT: usize = 4;
const ASK_PRICE: usize = 5;
const BID_PRICE: usize = 6;
const BID_AMOUNT: usize = 7;

/// Why a first line is not a Tardis quotes header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotQuotes {
    /// A Tardis header (it starts with Tardis's four common columns) of
    /// another data type.
    OtherTardis,
    /// Not Tardis at all.
    NotTardis,
}

/// Where each needed column is in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    /// `at[k]`: the index in the row of `NAMES[k]`.
    at: [usize; 8],
    /// The `k`s of `at` in the row's order (a missing field is named in
    /// the order a reader sees the row).
    by_position: [usize; 8],
    /// Fields in the header.
    count: usize,
}

impl Columns {
    /// The columns of a header line (without its newline).
    ///
    /// # Errors
    /// Not a Tardis quotes / book_ticker header.
    pub fn from_header(line: &[u8]) -> Result<Columns, NotQuotes> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let names: Vec<&[u8]> = line.split(|&b| b == b',').collect();
        if names.len() < 4
            || !names
                .iter()
                .zip(&NAMES[..4])
                .all(|(n, w)| *n == w.as_bytes())
        {
            return Err(NotQuotes::NotTardis);
        }
        let mut at = [0usize; 8];
        for (k, want) in NAMES.iter().enumerate() {
            at[k] = names
                .iter()
                .position(|n| n == &want.as_bytes())
                .ok_or(NotQuotes::OtherTardis)?;
        }
        let mut by_position = [0, 1, 2, 3, 4, 5, 6, 7];
        by_position.sort_by_key(|&k| at[k]);
        Ok(Columns {
            at,
            by_position,
            count: names.len(),
        })
    }
}

/// Rows of a Tardis quotes / book_ticker stream.
#[derive(Debug)]
pub struct TardisSource {
    reader: BufReader<Stream>,
    cols: Columns,
    /// Which timestamp column becomes `ts_ns`.
    ts_col: usize,
    symbols: SymbolMap,
    /// The current row (reused).
    raw: Vec<u8>,
    /// The current row's field bounds (reused).
    bounds: Vec<(usize, usize)>,
    /// `exchange:symbol` of the current row (reused).
    key: Vec<u8>,
    /// Lines read (the header is line 1).
    line_no: u64,
    done: bool,
}

impl TardisSource {
    /// Reads the header of `stream`.
    ///
    /// # Errors
    /// The header is not a Tardis quotes / book_ticker header, or cannot
    /// be read (usage errors naming `name`).
    pub fn new(name: &str, stream: Stream, opts: &DecodeOptions) -> Result<TardisSource, Failure> {
        let mut reader = BufReader::with_capacity(READ_BUF, stream);
        let mut header = Vec::new();
        reader
            .read_until(b'\n', &mut header)
            .map_err(|e| Failure::Usage(format!("{name}: cannot read the header: {e}")))?;
        if header.last() == Some(&b'\n') {
            header.pop();
        }
        let cols = Columns::from_header(&header).map_err(|_| {
            Failure::Usage(format!(
                "{name}: the first line is not a Tardis quotes/book_ticker header ({HEADER})"
            ))
        })?;
        Ok(TardisSource {
            reader,
            ts_col: match opts.ts {
                TsField::Event => cols.at[TIMESTAMP],
                TsField::Recv => cols.at[LOCAL_TIMESTAMP],
            },
            cols,
            symbols: opts.symbols.clone(),
            raw: Vec::with_capacity(256),
            bounds: Vec::with_capacity(16),
            key: Vec::with_capacity(64),
            line_no: 1,
            done: false,
        })
    }

    /// The next quote line, or why the next row is skipped.
    pub fn next_line(&mut self, line: &mut Vec<u8>) -> Step {
        loop {
            if self.done {
                return Step::End;
            }
            self.raw.clear();
            self.line_no += 1;
            match self.reader.read_until(b'\n', &mut self.raw) {
                Ok(0) => {
                    self.done = true;
                    return Step::End;
                }
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    let guard = &self.reader.get_ref().get_ref().1;
                    return Step::Skipped(guard.failure(Unit::Line, self.line_no).unwrap_or(
                        Skip {
                            unit: Unit::Line,
                            number: self.line_no,
                            reason: Reason::Corrupt,
                            detail: e.to_string(),
                        },
                    ));
                }
            }
            let mut row = &self.raw[..];
            while let [rest @ .., b'\n' | b'\r'] = row {
                row = rest;
            }
            if row.is_empty() {
                continue; // a blank line (say, the file's last) is not a row
            }
            return match self.quote(line) {
                Ok(()) => Step::Line,
                Err((reason, detail)) => {
                    line.clear();
                    Step::Skipped(Skip {
                        unit: Unit::Line,
                        number: self.line_no,
                        reason,
                        detail,
                    })
                }
            };
        }
    }

    /// Builds the quote of the row in `self.raw` into `line`.
    fn quote(&mut self, line: &mut Vec<u8>) -> Result<(), (Reason, String)> {
        let mut row = &self.raw[..];
        while let [rest @ .., b'\n' | b'\r'] = row {
            row = rest;
        }
        self.bounds.clear();
        let mut start = 0;
        for comma in memchr::memchr_iter(b',', row) {
            self.bounds.push((start, comma));
            start = comma + 1;
        }
        self.bounds.push((start, row.len()));
        let n = self.bounds.len();
        if n > self.cols.count {
            return Err((
                Reason::BadField,
                format!("{n} fields, the header has {}", self.cols.count),
            ));
        }
        let cols = &self.cols;
        let bounds = &self.bounds;
        let field = |k: usize| -> Result<&[u8], (Reason, String)> {
            match bounds.get(cols.at[k]) {
                Some(&(a, b)) if b > a => Ok(&row[a..b]),
                _ => Err((Reason::MissingField, NAMES[k].to_string())),
            }
        };
        // Every needed field first, in the row's order, so the first
        // missing one is named.
        for k in cols.by_position {
            field(k)?;
        }
        let ts_name = if self.ts_col == cols.at[TIMESTAMP] {
            NAMES[TIMESTAMP]
        } else {
            NAMES[LOCAL_TIMESTAMP]
        };
        let (a, b) = bounds[self.ts_col];
        let ts_us = tickfan::feed::parse::ascii_u64(&row[a..b]).ok_or_else(|| {
            (
                Reason::BadField,
                format!(
                    "{ts_name} `{}` is not microseconds",
                    String::from_utf8_lossy(&row[a..b])
                ),
            )
        })?;
        let ts_ns = ts_us.checked_mul(1_000).ok_or_else(|| {
            (
                Reason::BadField,
                format!("{ts_name} {ts_us} µs overflows ns"),
            )
        })?;
        self.key.clear();
        self.key.extend_from_slice(field(EXCHANGE)?);
        self.key.push(b':');
        self.key.extend_from_slice(field(SYMBOL)?);
        let symbol = self.symbols.rename(&self.key);
        if !valid_symbol(symbol) {
            return Err((
                Reason::BadSymbol,
                format!(
                    "`{}` is not 1-24 printable bytes; rename it with --symbol-map",
                    String::from_utf8_lossy(symbol)
                ),
            ));
        }
        let mut num = itoa::Buffer::new();
        line.extend_from_slice(num.format(ts_ns).as_bytes());
        line.push(b',');
        line.extend_from_slice(symbol);
        for k in [BID_PRICE, ASK_PRICE, BID_AMOUNT, ASK_AMOUNT] {
            line.push(b',');
            line.extend_from_slice(field(k)?);
        }
        match parse_line(line) {
            Ok(_) => Ok(()),
            Err(PoisonReason::NonPositivePrice) => Err((
                Reason::NonPositivePrice,
                format!(
                    "bid {} ask {}",
                    text(field(BID_PRICE)?),
                    text(field(ASK_PRICE)?)
                ),
            )),
            Err(p) => Err((Reason::BadField, self.culprit(row, p))),
        }
    }

    /// Names the field of `row` the feed's parser refused (`p`).
    fn culprit(&self, row: &[u8], p: PoisonReason) -> String {
        for k in [BID_PRICE, ASK_PRICE, BID_AMOUNT, ASK_AMOUNT] {
            let (a, b) = self.bounds[self.cols.at[k]];
            let f = &row[a..b];
            let ok = match k {
                BID_PRICE | ASK_PRICE => tickfan::feed::parse::parse_decimal(f).is_ok(),
                _ => !f.starts_with(b"-") && tickfan::feed::parse::parse_decimal(f).is_ok(),
            };
            if !ok {
                return format!("{} `{}`: {}", NAMES[k], text(f), p.as_str());
            }
        }
        p.as_str().to_string()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests {
    use super::super::source::{InputFormat, Source};
    use super::*;

    fn from_bytes(bytes: Vec<u8>, ts: TsField) -> Source {
        let opts = DecodeOptions {
            ts,
            ..DecodeOptions::default()
        };
        let r = Box::new(std::io::Cursor::new(bytes));
        Source::from_reader("t.csv", r, InputFormat::Auto, &opts).unwrap()
    }

    #[test]
    fn columns_are_found_by_name() {
        let c = Columns::from_header(HEADER.as_bytes()).unwrap();
        assert_eq!(c.at, [0, 1, 2, 3, 4, 5, 6, 7]);
        let c = Columns::from_header(
            b"exchange,symbol,timestamp,local_timestamp,bid_price,bid_amount,ask_price,ask_amount,extra\r",
        )
        .unwrap();
        assert_eq!(c.at[BID_PRICE], 4);
        assert_eq!(c.count, 9);
        assert_eq!(
            Columns::from_header(b"exchange,symbol,timestamp,local_timestamp,id,side,price,amount"),
            Err(NotQuotes::OtherTardis)
        );
        assert_eq!(
            Columns::from_header(b"ts_ns,symbol"),
            Err(NotQuotes::NotTardis)
        );
    }

    #[test]
    fn rows_become_quotes_and_bad_rows_name_their_column() {
        let text = format!(
            "{HEADER}\nbinance,BTCUSDT,1585699201147000,1585699201270777,0.5,6423.1,6422.9,1.2\n\
             binance,BTCUSDT,1585699201147001,1585699201270778,0.5,6423.1,,1.2\n\
             binance,BTCUSDT,x,1585699201270779,0.5,6423.1,6422.9\n\
             binance,BTCUSDT,1,2,0.5,0,6422.9,1.2\n\
             binance,BTCUSDT,1,2,0.5,6423.1,6422.9,1e3\n"
        );
        let mut src = from_bytes(text.into_bytes(), TsField::Recv);
        let mut line = Vec::new();
        assert_eq!(src.next_line(&mut line), Step::Line);
        assert_eq!(
            String::from_utf8(line.clone()).unwrap(),
            "1585699201270777000,binance:BTCUSDT,6422.9,6423.1,1.2,0.5"
        );
        let skip = |s: Step| match s {
            Step::Skipped(k) => (k.number, k.reason, k.detail),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            skip(src.next_line(&mut line)),
            (3, Reason::MissingField, "bid_price".into())
        );
        assert_eq!(
            skip(src.next_line(&mut line)),
            (4, Reason::MissingField, "bid_amount".into())
        );
        assert_eq!(skip(src.next_line(&mut line)).1, Reason::NonPositivePrice);
        let (n, r, d) = skip(src.next_line(&mut line));
        assert_eq!((n, r), (6, Reason::BadField));
        assert!(d.starts_with("bid_amount `1e3`"), "{d}");
        assert_eq!(src.next_line(&mut line), Step::End);
    }
}
