//! The tick line parser: one feed line of text in, one [`Quote`] (or a named
//! [`PoisonReason`]) out.
//!
//! This module owns the wire grammar of the inbound feed,
//! `ts_ns,symbol,bid,ask,bid_qty,ask_qty`, and the decision of which lines are
//! poison and why. It sits on the hot path (every tick of every connection
//! passes through it), so it never allocates and accepts a valid line in a
//! single pass over its bytes.
//!
//! # Design
//!
//! There are two parsers with one meaning:
//!
//! * a *fast path* that walks the line once, front to back (digits eight at
//!   a time with SWAR arithmetic on a `u64`, no `unsafe`), and accepts only
//!   the ordinary shape of a valid tick (at most 19 digit characters in any
//!   number, no sign, a non-zero price). It never rejects anything: on the
//!   first byte it does not like it gives up and returns `None`;
//! * a *checked path* that follows the rules literally, in the documented
//!   check order (UTF-8, field count, empty field, then fields left to right),
//!   and names the exact reason. It runs only for lines the fast path gave up
//!   on: poison lines and rare valid ones (a 20-digit timestamp, numbers with
//!   superfluous leading zeros).
//!
//! Invariant, checked by property tests: whenever the fast path accepts a
//! line, the checked path accepts it with the identical result. So the result
//! of [`parse_line`] is always the checked path's result; the fast path only
//! makes it cheaper.

use crate::model::decimal::Decimal;
use crate::model::poison::PoisonReason;
use crate::model::tick::Quote;

/// Longest accepted symbol, in bytes.
pub(crate) const MAX_SYMBOL_LEN: usize = 24;

/// Number of comma-separated fields in a tick line.
const FIELD_COUNT: usize = 6;

/// Header lines start with this; they are skipped.
const HEADER_PREFIX: &[u8] = b"ts_ns,";

/// What one feed line turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A valid quote.
    Tick {
        /// The symbol bytes exactly as received: 1..=[`MAX_SYMBOL_LEN`] bytes,
        /// each printable ASCII (`0x21..=0x7E`) other than `,`.
        symbol: &'a [u8],
        /// The numeric fields, exactly as received (scale and trailing zeros
        /// kept).
        quote: Quote,
    },
    /// Not data: a header (`ts_ns,...`), a comment (`#...`) or an empty line.
    Skip,
}

/// Parses one feed line.
///
/// `line` excludes the `'\n'`; a single trailing `'\r'` is stripped here.
/// Header lines (starting with `ts_ns,`), comments (starting with `#`) and
/// empty lines give [`Line::Skip`]; that decision comes before any
/// validation, so a comment may hold any bytes.
///
/// `bid >= ask` (a crossed or locked book) is legal and never rejected.
///
/// # Errors
///
/// When several things are wrong the first in this order is reported:
///
/// 1. [`PoisonReason::InvalidUtf8`]: the line holds a byte `>= 0x80` and is
///    not valid UTF-8 (valid non-ASCII UTF-8 passes here and fails later as
///    `BadSymbol` or `BadNumber`);
/// 2. [`PoisonReason::WrongFieldCount`]: not exactly six comma-separated
///    fields;
/// 3. [`PoisonReason::EmptyField`]: one of the six fields is empty;
/// 4. then the fields left to right:
///    * `ts_ns`: [`PoisonReason::BadNumber`] unless ASCII digits whose value
///      fits a `u64` (leading zeros allowed);
///    * `symbol`: [`PoisonReason::BadSymbol`] if longer than
///      [`MAX_SYMBOL_LEN`] or holding a byte outside `0x21..=0x7E`;
///    * `bid`, `ask`: [`PoisonReason::NonPositivePrice`] for a `-` followed by
///      a valid number, or a value of zero; otherwise as [`parse_decimal`];
///    * `bid_qty`, `ask_qty`: [`PoisonReason::NegativeQuantity`] for a `-`
///      followed by a valid number (`-0` included); zero is fine; otherwise as
///      [`parse_decimal`].
///
///    A `-` followed by anything that is not a valid number is
///    [`PoisonReason::BadNumber`].
#[inline]
pub fn parse_line(line: &[u8]) -> Result<Line<'_>, PoisonReason> {
    let line = match line {
        [rest @ .., b'\r'] => rest,
        _ => line,
    };
    if line.is_empty() || line[0] == b'#' || line.starts_with(HEADER_PREFIX) {
        return Ok(Line::Skip);
    }
    match parse_fast(line) {
        Some(tick) => Ok(tick),
        None => parse_checked(line),
    }
}

/// Parses one unsigned decimal field: `digits` or `digits.digits`, with at
/// least one digit on each side of the point.
///
/// The result keeps the scale as written (`1.38700` is mantissa `138700`,
/// scale 5). Leading zeros are accepted and are not significant (`007.5` is
/// `75`, scale 1), so re-encoding with [`Decimal::append_to`] gives back the
/// text exactly whenever it had no superfluous leading zeros.
///
/// # Errors
///
/// * [`PoisonReason::EmptyField`] for an empty `field`;
/// * [`PoisonReason::BadNumber`] for anything else that is not `digits` or
///   `digits.digits` (signs, exponents, spaces, a bare or doubled point), for
///   more than [`Decimal::MAX_SCALE`] digits after the point, and for more
///   than [`Decimal::MAX_DIGITS`] significant digits (all digits from the
///   first non-zero one on, point ignored).
pub fn parse_decimal(field: &[u8]) -> Result<Decimal, PoisonReason> {
    if field.is_empty() {
        return Err(PoisonReason::EmptyField);
    }
    let (int, frac): (&[u8], &[u8]) = match memchr::memchr(b'.', field) {
        Some(p) => {
            let frac = &field[p + 1..];
            if frac.is_empty() {
                return Err(PoisonReason::BadNumber);
            }
            (&field[..p], frac)
        }
        None => (field, &[]),
    };
    if int.is_empty() || frac.len() > usize::from(Decimal::MAX_SCALE) {
        return Err(PoisonReason::BadNumber);
    }
    let mut mantissa: u64 = 0;
    let mut significant = 0usize;
    for &b in int.iter().chain(frac) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(PoisonReason::BadNumber);
        }
        if significant > 0 || d != 0 {
            significant += 1;
            if significant > Decimal::MAX_DIGITS {
                return Err(PoisonReason::BadNumber);
            }
            // At most 19 significant digits: < 10^19 < u64::MAX, no overflow.
            mantissa = mantissa * 10 + u64::from(d);
        }
    }
    // `frac.len() <= MAX_SCALE` was checked above, so this cannot truncate.
    Ok(Decimal::new(mantissa, frac.len() as u8))
}

// ---------------------------------------------------------------------------
// Checked path: the rules, literally, in the documented order.
// ---------------------------------------------------------------------------

/// Parses a line that is neither empty nor a header nor a comment, checking
/// every rule in the documented order.
fn parse_checked(line: &[u8]) -> Result<Line<'_>, PoisonReason> {
    if !line.is_ascii() && std::str::from_utf8(line).is_err() {
        return Err(PoisonReason::InvalidUtf8);
    }
    let f = split_fields(line)?;
    if f.iter().any(|field| field.is_empty()) {
        return Err(PoisonReason::EmptyField);
    }
    let ts_ns = parse_u64(f[0])?;
    let symbol = check_symbol(f[1])?;
    let bid = parse_price(f[2])?;
    let ask = parse_price(f[3])?;
    let bid_qty = parse_quantity(f[4])?;
    let ask_qty = parse_quantity(f[5])?;
    Ok(Line::Tick {
        symbol,
        quote: Quote {
            ts_ns,
            bid,
            ask,
            bid_qty,
            ask_qty,
        },
    })
}

/// Splits on commas into exactly [`FIELD_COUNT`] fields.
fn split_fields(line: &[u8]) -> Result<[&[u8]; FIELD_COUNT], PoisonReason> {
    let mut fields: [&[u8]; FIELD_COUNT] = [&[]; FIELD_COUNT];
    let mut n = 0;
    let mut start = 0;
    for comma in memchr::memchr_iter(b',', line) {
        if n == FIELD_COUNT - 1 {
            return Err(PoisonReason::WrongFieldCount);
        }
        fields[n] = &line[start..comma];
        n += 1;
        start = comma + 1;
    }
    if n != FIELD_COUNT - 1 {
        return Err(PoisonReason::WrongFieldCount);
    }
    fields[n] = &line[start..];
    Ok(fields)
}

/// A non-empty run of ASCII digits whose value fits a `u64` (the tools
/// read stamps and sequence numbers out of payloads with it).
pub fn ascii_u64(field: &[u8]) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    parse_u64(field).ok()
}

/// ASCII digits whose value fits a `u64`.
fn parse_u64(field: &[u8]) -> Result<u64, PoisonReason> {
    let mut v: u64 = 0;
    for &b in field {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(PoisonReason::BadNumber);
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(PoisonReason::BadNumber)?;
    }
    Ok(v)
}

/// True for a byte allowed in a symbol: printable ASCII except `,`.
#[inline(always)]
fn is_symbol_byte(b: u8) -> bool {
    (0x21..=0x7E).contains(&b) && b != b','
}

fn check_symbol(field: &[u8]) -> Result<&[u8], PoisonReason> {
    if field.len() <= MAX_SYMBOL_LEN && field.iter().all(|&b| is_symbol_byte(b)) {
        Ok(field)
    } else {
        Err(PoisonReason::BadSymbol)
    }
}

/// A number that may carry a leading `-`; `negative` is the reason for a `-`
/// followed by a valid number.
fn parse_signed(field: &[u8], negative: PoisonReason) -> Result<Decimal, PoisonReason> {
    match field.strip_prefix(b"-") {
        Some(rest) => match parse_decimal(rest) {
            Ok(_) => Err(negative),
            Err(_) => Err(PoisonReason::BadNumber),
        },
        None => parse_decimal(field),
    }
}

fn parse_price(field: &[u8]) -> Result<Decimal, PoisonReason> {
    let d = parse_signed(field, PoisonReason::NonPositivePrice)?;
    if d.is_zero() {
        Err(PoisonReason::NonPositivePrice)
    } else {
        Ok(d)
    }
}

fn parse_quantity(field: &[u8]) -> Result<Decimal, PoisonReason> {
    parse_signed(field, PoisonReason::NegativeQuantity)
}

// ---------------------------------------------------------------------------
// Fast path: one pass, accepts the ordinary valid line, never rejects.
// ---------------------------------------------------------------------------

/// Parses the common shape of a valid line in one pass. `None` means "not
/// sure": the caller then runs [`parse_checked`]. Never returns a tick that
/// [`parse_checked`] would not return identically.
#[inline]
fn parse_fast(line: &[u8]) -> Option<Line<'_>> {
    let (ts_ns, rest) = fast_u64(line)?;
    let (symbol, rest) = fast_symbol(rest)?;
    let (bid, rest) = fast_decimal(rest, b',')?;
    let (ask, rest) = fast_decimal(rest, b',')?;
    let (bid_qty, rest) = fast_decimal(rest, b',')?;
    let (ask_qty, rest) = fast_decimal(rest, b'\n')?;
    if !rest.is_empty() || bid.is_zero() || ask.is_zero() {
        return None;
    }
    Some(Line::Tick {
        symbol,
        quote: Quote {
            ts_ns,
            bid,
            ask,
            bid_qty,
            ask_qty,
        },
    })
}

/// Counts the leading ASCII digits of `s` and accumulates them onto `v`
/// (wrapping: callers only trust the value for at most 19 digits in all).
///
/// Eight bytes at a time while eight are left (SWAR: classify and convert
/// all eight in a few integer operations), then byte by byte.
#[inline(always)]
fn fast_digits(s: &[u8], mut v: u64) -> (u64, usize) {
    const ZEROS: u64 = 0x3030_3030_3030_3030;
    const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const SIXES: u64 = 0x0606_0606_0606_0606;
    let mut i = 0;
    while let Some(chunk) = s.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        // A byte is a digit iff its high nibble is 3 and its low nibble plus
        // 6 stays below 16. `x + SIXES` can carry into the next byte only
        // out of a byte >= 0xFA, itself already flagged; so the lowest
        // flagged byte is exactly the first non-digit.
        let non_digit =
            ((x & HIGH_NIBBLES) ^ ZEROS) | ((x.wrapping_add(SIXES) & HIGH_NIBBLES) ^ ZEROS);
        let k = (non_digit.trailing_zeros() / 8) as usize; // 8 when all digits
                                                           // Subtracting '0' from every byte borrows only upward out of a
                                                           // non-digit byte, so the k low bytes are exact digit values.
        let digits = x.wrapping_sub(ZEROS);
        if k == 8 {
            v = v.wrapping_mul(POW10[8]).wrapping_add(swar8(digits));
            i += 8;
            continue;
        }
        if k > 0 {
            // Drop the non-digit bytes; the vacated low bytes read as leading zeros.
            let digits = digits << (8 * (8 - k));
            v = v.wrapping_mul(POW10[k]).wrapping_add(swar8(digits));
        }
        return (v, i + k);
    }
    while i < s.len() {
        let d = s[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        i += 1;
    }
    (v, i)
}

/// Powers of ten for up to eight digits.
const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The value of eight digit values (0..=9), one per byte, the first digit in
/// the lowest byte: pairs, then quadruples, then the whole, in three
/// multiplications.
#[inline(always)]
fn swar8(d: u64) -> u64 {
    const BYTE_LANES: u64 = 0x0000_00FF_0000_00FF;
    let pairs = d.wrapping_mul(10).wrapping_add(d >> 8);
    let hi = (pairs & BYTE_LANES).wrapping_mul(100 + (1_000_000 << 32));
    let lo = ((pairs >> 16) & BYTE_LANES).wrapping_mul(1 + (10_000 << 32));
    hi.wrapping_add(lo) >> 32
}

/// 1..=19 digits then a `,`; returns the value and what follows the comma.
#[inline(always)]
fn fast_u64(s: &[u8]) -> Option<(u64, &[u8])> {
    let (v, n) = fast_digits(s, 0);
    if n == 0 || n > Decimal::MAX_DIGITS || s.get(n) != Some(&b',') {
        return None;
    }
    Some((v, &s[n + 1..]))
}

/// 1..=24 symbol bytes then a `,`.
#[inline(always)]
fn fast_symbol(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let limit = s.len().min(MAX_SYMBOL_LEN + 1);
    let mut i = 0;
    while i < limit {
        let b = s[i];
        if b == b',' {
            break;
        }
        if !is_symbol_byte(b) {
            return None;
        }
        i += 1;
    }
    if i == 0 || i > MAX_SYMBOL_LEN || s.get(i) != Some(&b',') {
        return None;
    }
    Some((&s[..i], &s[i + 1..]))
}

/// `digits` or `digits.digits` with at most 19 digits in all (leading zeros
/// included) and at most 18 after the point, followed by `delim` (or by the
/// end of the line when `delim` is `'\n'`, which a line never contains).
#[inline(always)]
fn fast_decimal(s: &[u8], delim: u8) -> Option<(Decimal, &[u8])> {
    let (v, int_len) = fast_digits(s, 0);
    if int_len == 0 {
        return None;
    }
    let (v, frac_len, end) = if s.get(int_len) == Some(&b'.') {
        let frac = &s[int_len + 1..];
        let (v, frac_len) = fast_digits(frac, v);
        if frac_len == 0 {
            return None;
        }
        (v, frac_len, int_len + 1 + frac_len)
    } else {
        (v, 0, int_len)
    };
    if int_len + frac_len > Decimal::MAX_DIGITS || frac_len > usize::from(Decimal::MAX_SCALE) {
        return None;
    }
    let rest = if delim == b'\n' {
        if end != s.len() {
            return None;
        }
        &s[end..]
    } else {
        if s.get(end) != Some(&delim) {
            return None;
        }
        &s[end + 1..]
    };
    // `frac_len <= MAX_SCALE` was checked above, so this cannot truncate.
    Some((Decimal::new(v, frac_len as u8), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::poison::PoisonReason::*;

    const REAL: &[u8] = b"1399230051815000000,EURUSD.FXCM,1.38700,1.38790,1000000,1000000";

    #[test]
    fn ascii_u64_takes_only_non_empty_digit_runs_that_fit() {
        assert_eq!(ascii_u64(b"0"), Some(0));
        assert_eq!(ascii_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(ascii_u64(b"18446744073709551616"), None);
        assert_eq!(ascii_u64(b""), None);
        assert_eq!(ascii_u64(b"+1"), None);
        assert_eq!(ascii_u64(b"1 "), None);
    }

    fn tick(line: &[u8]) -> (Vec<u8>, Quote) {
        match parse_line(line) {
            Ok(Line::Tick { symbol, quote }) => (symbol.to_vec(), quote),
            other => panic!("expected a tick from {:?}, got {other:?}", show(line)),
        }
    }

    fn err(line: &[u8]) -> PoisonReason {
        match parse_line(line) {
            Err(r) => r,
            ok => panic!("expected an error from {:?}, got {ok:?}", show(line)),
        }
    }

    fn show(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    fn d(m: u64, s: u8) -> Decimal {
        Decimal::new(m, s)
    }

    #[test]
    fn real_lines_parse_exactly() {
        let (sym, q) = tick(REAL);
        assert_eq!(sym, b"EURUSD.FXCM");
        assert_eq!(
            q,
            Quote {
                ts_ns: 1_399_230_051_815_000_000,
                bid: d(138_700, 5),
                ask: d(138_790, 5),
                bid_qty: d(1_000_000, 0),
                ask_qty: d(1_000_000, 0),
            }
        );
        let (sym, q) = tick(b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000");
        assert_eq!(sym, b"EURUSD");
        assert_eq!(q.ts_ns, 1_701_388_800_123_456_789);
        assert_eq!((q.bid, q.ask), (d(108_512, 5), d(108_515, 5)));
        assert_eq!((q.bid_qty, q.ask_qty), (d(1_000_000, 0), d(1_500_000, 0)));
        let (sym, q) = tick(b"1701388800000000000,BTC-USD,42000.5,42001.25,0.015,2.5");
        assert_eq!(sym, b"BTC-USD");
        assert_eq!((q.bid, q.ask), (d(420_005, 1), d(4_200_125, 2)));
        assert_eq!((q.bid_qty, q.ask_qty), (d(15, 3), d(25, 1)));
        let (sym, q) = tick(b"1,USD/JPY,147.123,147.125,0,0");
        assert_eq!(sym, b"USD/JPY");
        assert_eq!((q.bid_qty, q.ask_qty), (d(0, 0), d(0, 0)));
    }

    #[test]
    fn real_lines_take_the_fast_path() {
        for line in [
            REAL,
            b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000",
            b"0,X,0.000000000000000001,9999999999999999999,0,0.0",
        ] {
            let fast = parse_fast(line).expect("fast path accepts an ordinary line");
            assert_eq!(Ok(fast), parse_checked(line));
        }
    }

    #[test]
    fn crlf_is_stripped_once() {
        let mut crlf = REAL.to_vec();
        crlf.push(b'\r');
        assert_eq!(parse_line(&crlf), parse_line(REAL));
        crlf.push(b'\r');
        assert_eq!(err(&crlf), BadNumber);
        assert_eq!(parse_line(b"\r"), Ok(Line::Skip));
        assert_eq!(
            parse_line(b"ts_ns,symbol,bid,ask,bid_qty,ask_qty\r"),
            Ok(Line::Skip)
        );
    }

    #[test]
    fn skips_headers_comments_and_empty_lines() {
        assert_eq!(parse_line(b""), Ok(Line::Skip));
        assert_eq!(
            parse_line(b"ts_ns,symbol,bid,ask,bid_qty,ask_qty"),
            Ok(Line::Skip)
        );
        assert_eq!(parse_line(b"ts_ns,"), Ok(Line::Skip));
        assert_eq!(
            parse_line(b"# a comment, with, commas \xff"),
            Ok(Line::Skip)
        );
        assert_eq!(parse_line(b"#"), Ok(Line::Skip));
        // Not a header: the prefix must include the comma.
        assert_eq!(err(b"ts_ns"), WrongFieldCount);
        assert_eq!(err(b" "), WrongFieldCount);
    }

    #[test]
    fn crossed_and_locked_books_are_legal() {
        let (_, q) = tick(b"1,EURUSD,1.2,1.1,1,1");
        assert_eq!((q.bid, q.ask), (d(12, 1), d(11, 1)));
        let (_, q) = tick(b"1,EURUSD,1.10,1.1,1,1");
        assert_eq!((q.bid, q.ask), (d(110, 2), d(11, 1)));
    }

    #[test]
    fn invalid_utf8() {
        assert_eq!(err(b"1,EUR\xffUSD,1.1,1.2,1,1"), InvalidUtf8);
        assert_eq!(err(b"1,EURUSD,1.1,1.2,1,1\xc3"), InvalidUtf8);
        // Checked before the field count.
        assert_eq!(err(b"\xff"), InvalidUtf8);
        // Valid UTF-8 that is not ASCII fails later, in its field.
        assert_eq!(err("1,EUR€,1.1,1.2,1,1".as_bytes()), BadSymbol);
        assert_eq!(err("1,EUR,1.1,1.2,1,١".as_bytes()), BadNumber);
    }

    #[test]
    fn wrong_field_count() {
        assert_eq!(err(b"1,EURUSD,1.1,1.2,1"), WrongFieldCount);
        assert_eq!(err(b"1,EURUSD,1.1,1.2,1,1,1"), WrongFieldCount);
        assert_eq!(err(b"1;EURUSD;1.1;1.2;1;1"), WrongFieldCount);
        // Checked before empty fields and bad numbers.
        assert_eq!(err(b",,,,,,"), WrongFieldCount);
        assert_eq!(err(b"x,EURUSD,1.1,1.2,1"), WrongFieldCount);
    }

    #[test]
    fn empty_field() {
        assert_eq!(err(b",EURUSD,1.1,1.2,1,1"), EmptyField);
        assert_eq!(err(b"1,,1.1,1.2,1,1"), EmptyField);
        assert_eq!(err(b"1,EURUSD,1.1,1.2,1,"), EmptyField);
        assert_eq!(err(b",,,,,"), EmptyField);
        // Checked before bad fields to its left.
        assert_eq!(err(b"x,EUR USD,-1,1.2,,1"), EmptyField);
    }

    #[test]
    fn bad_number() {
        for ts in [
            &b"12a"[..],
            b"-1",
            b"+1",
            b"1.5",
            b" 1",
            b"18446744073709551616",
        ] {
            let mut line = ts.to_vec();
            line.extend_from_slice(b",EURUSD,1.1,1.2,1,1");
            assert_eq!(err(&line), BadNumber, "ts {:?}", show(ts));
        }
        for price in [
            &b"1."[..],
            b".5",
            b"1.2.3",
            b"+1.1",
            b"1e5",
            b" 1.1",
            b"1.1 ",
            b"1,1",
            b"-",
            b"--1",
            b"-x",
            b"-1.",
            b"12345678901234567890",  // 20 significant digits
            b"1.2345678901234567890", // 20 significant digits
            b"0.0000000000000000001", // scale 19
            b"99999999999999999999",  // does not fit a u64 either
            b"0x10",
        ] {
            let line = [&b"1,EURUSD,"[..], price, b",1.2,1,1"].concat();
            let want = if price == b"1,1" {
                WrongFieldCount
            } else {
                BadNumber
            };
            assert_eq!(err(&line), want, "bid {:?}", show(price));
            let line = [&b"1,EURUSD,1.1,1.2,1,"[..], price].concat();
            assert_eq!(err(&line), want, "ask_qty {:?}", show(price));
        }
    }

    #[test]
    fn number_limits() {
        assert_eq!(tick(b"18446744073709551615,X,1,1,1,1").1.ts_ns, u64::MAX);
        assert_eq!(tick(b"00000000000000000000000001,X,1,1,1,1").1.ts_ns, 1);
        let (_, q) =
            tick(b"1,X,9999999999999999999,0.999999999999999999,0000000000000000000000012.5,0");
        assert_eq!(q.bid, d(9_999_999_999_999_999_999, 0));
        assert_eq!(q.ask, d(999_999_999_999_999_999, 18));
        assert_eq!(q.bid_qty, d(125, 1));
    }

    #[test]
    fn non_positive_price() {
        assert_eq!(err(b"1,EURUSD,0,1.2,1,1"), NonPositivePrice);
        assert_eq!(err(b"1,EURUSD,1.1,0.00000,1,1"), NonPositivePrice);
        assert_eq!(err(b"1,EURUSD,-1.1,1.2,1,1"), NonPositivePrice);
        assert_eq!(err(b"1,EURUSD,1.1,-0,1,1"), NonPositivePrice);
        // Left to right: a bad bid hides a bad ask_qty, a bad ts hides the bid.
        assert_eq!(err(b"1,EURUSD,0,1.2,1,-1"), NonPositivePrice);
        assert_eq!(err(b"x,EURUSD,0,1.2,1,-1"), BadNumber);
        // A garbage number after the sign is a bad number.
        assert_eq!(err(b"1,EURUSD,-1.,1.2,1,1"), BadNumber);
    }

    #[test]
    fn negative_quantity() {
        assert_eq!(err(b"1,EURUSD,1.1,1.2,-1000000,1"), NegativeQuantity);
        assert_eq!(err(b"1,EURUSD,1.1,1.2,1,-0.5"), NegativeQuantity);
        assert_eq!(err(b"1,EURUSD,1.1,1.2,-0,1"), NegativeQuantity);
        assert_eq!(err(b"1,EURUSD,1.1,1.2,-1x,1"), BadNumber);
        let (_, q) = tick(b"1,EURUSD,1.1,1.2,0,0.000");
        assert_eq!((q.bid_qty, q.ask_qty), (d(0, 0), d(0, 3)));
    }

    #[test]
    fn bad_symbol() {
        assert_eq!(err(b"1,ABCDEFGHIJKLMNOPQRSTUVWXY,1.1,1.2,1,1"), BadSymbol); // 25
        assert_eq!(tick(b"1,ABCDEFGHIJKLMNOPQRSTUVWX,1.1,1.2,1,1").0.len(), 24);
        assert_eq!(err(b"1,EUR USD,1.1,1.2,1,1"), BadSymbol);
        assert_eq!(err(b"1,EUR\tUSD,1.1,1.2,1,1"), BadSymbol);
        assert_eq!(err(b"1,EUR\x7fUSD,1.1,1.2,1,1"), BadSymbol);
        assert_eq!(err(b"1,EUR\x00USD,1.1,1.2,1,1"), BadSymbol);
        assert_eq!(err(b"1,EURUSD\r,1.1,1.2,1,1"), BadSymbol);
        // Left to right: the symbol comes before the prices.
        assert_eq!(err(b"1,EUR USD,-1,1.2,1,1"), BadSymbol);
        // Every other printable byte is fine.
        assert_eq!(tick(b"1,!~/.:_-^|{}[]@$%&*'\"()<>,1.1,1.2,1,1").0.len(), 24);
    }

    #[test]
    fn parse_decimal_examples() {
        assert_eq!(parse_decimal(b"1.08512"), Ok(d(108_512, 5)));
        assert_eq!(parse_decimal(b"1.38700"), Ok(d(138_700, 5)));
        assert_eq!(parse_decimal(b"0.00012"), Ok(d(12, 5)));
        assert_eq!(parse_decimal(b"1000000"), Ok(d(1_000_000, 0)));
        assert_eq!(parse_decimal(b"007"), Ok(d(7, 0)));
        assert_eq!(parse_decimal(b"0"), Ok(d(0, 0)));
        assert_eq!(parse_decimal(b"0.0"), Ok(d(0, 1)));
        assert_eq!(
            parse_decimal(b"9999999999999999999"),
            Ok(d(9_999_999_999_999_999_999, 0))
        );
        assert_eq!(
            parse_decimal(b"0.123456789012345678"),
            Ok(d(123_456_789_012_345_678, 18))
        );
        assert_eq!(parse_decimal(b""), Err(EmptyField));
        assert_eq!(parse_decimal(b"-1"), Err(BadNumber));
        assert_eq!(parse_decimal(b"1.0000000000000000000"), Err(BadNumber)); // scale 19
        assert_eq!(parse_decimal(b"10000000000000000000"), Err(BadNumber)); // 20 digits
        assert_eq!(parse_decimal(b"."), Err(BadNumber));
        assert_eq!(parse_decimal(b"1e3"), Err(BadNumber));
    }

    #[test]
    fn poison_reasons_for_the_reader_are_not_produced_here() {
        // LineTooLong, SymbolLimit and TruncatedAtEof belong to the line reader
        // and the symbol table; make sure no line maps to them by accident.
        for line in [&b"\xff\xfe"[..], b",", b"1,2,3,4,5,6", REAL] {
            if let Err(r) = parse_line(line) {
                assert!(!matches!(r, LineTooLong | SymbolLimit | TruncatedAtEof));
            }
        }
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    /// One generated number: its text, whether the text is canonical (no
    /// superfluous leading zeros), and its exact value.
    #[derive(Debug, Clone)]
    struct Num {
        text: String,
        canonical: bool,
        value: Decimal,
    }

    /// A decimal with at most 19 significant digits and scale <= 18, written
    /// as `int` or `int.frac`, sometimes with 1..=3 superfluous leading zeros.
    fn num() -> impl Strategy<Value = Num> {
        (0u8..=Decimal::MAX_SCALE)
            .prop_flat_map(|scale| {
                let int_max = 10u64.pow(u32::from(Decimal::MAX_SCALE + 1 - scale));
                let frac_max = 10u64.pow(u32::from(scale));
                (
                    Just(scale),
                    0..int_max,
                    0..frac_max,
                    prop_oneof![3 => Just(0usize), 1 => 1usize..=3],
                )
            })
            .prop_map(|(scale, int, frac, pad)| {
                let s = usize::from(scale);
                let mut text = "0".repeat(pad);
                text.push_str(&int.to_string());
                if s > 0 {
                    text.push_str(&format!(".{frac:0s$}"));
                }
                let value = Decimal::new(int * 10u64.pow(u32::from(scale)) + frac, scale);
                Num {
                    text,
                    canonical: pad == 0,
                    value,
                }
            })
    }

    fn symbol() -> impl Strategy<Value = String> {
        // Printable ASCII (0x21..=0x7E) without the comma (0x2C).
        "[!-+\\--~]{1,24}"
    }

    #[derive(Debug, Clone)]
    struct Tick {
        ts: u64,
        symbol: String,
        nums: [Num; 4],
        crlf: bool,
    }

    impl Tick {
        fn fields(&self) -> Vec<String> {
            let mut f = vec![self.ts.to_string(), self.symbol.clone()];
            f.extend(self.nums.iter().map(|n| n.text.clone()));
            f
        }
        fn line(&self) -> Vec<u8> {
            let mut l = self.fields().join(",").into_bytes();
            if self.crlf {
                l.push(b'\r');
            }
            l
        }
    }

    fn tick() -> impl Strategy<Value = Tick> {
        let price = || num().prop_filter("price must be positive", |n| !n.value.is_zero());
        (
            any::<u64>(),
            symbol(),
            price(),
            price(),
            num(),
            num(),
            any::<bool>(),
        )
            .prop_map(|(ts, symbol, bid, ask, bq, aq, crlf)| Tick {
                ts,
                symbol,
                nums: [bid, ask, bq, aq],
                crlf,
            })
    }

    /// Lines from a small alphabet that reaches deep into the grammar.
    fn near_line() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            6 => b'0'..=b'9',
            2 => Just(b','),
            2 => Just(b'.'),
            1 => Just(b'-'),
            1 => Just(b'\r'),
            1 => b'A'..=b'Z',
            1 => Just(b' '),
            1 => Just(0xC3u8),
            1 => Just(0xA9u8),
            1 => any::<u8>(),
        ];
        proptest::collection::vec(byte, 0..80)
    }

    /// Field text at and around the edges of the grammar: digit counts near
    /// 19 and 20, scales near 18, bare points, signs, zeros, long symbols.
    fn edgy_field() -> impl Strategy<Value = String> {
        prop_oneof![
            "-?0{0,3}[0-9]{0,21}(\\.[0-9]{0,20})?",
            "[0-9]{17,21}",
            "[0-9]{0,3}\\.[0-9]{16,20}",
            "-?0+(\\.0+)?",
            "[ -~]{0,26}",
            "[A-Z]{23,26}",
            "[0-9.]{1,4}",
        ]
    }

    /// The fast path never disagrees with the checked path.
    fn assert_paths_agree(line: &[u8]) {
        if let Some(fast) = parse_fast(line) {
            assert_eq!(
                Ok(fast),
                parse_checked(line),
                "line {:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    proptest! {
        #[test]
        fn valid_ticks_round_trip(t in tick()) {
            let line = t.line();
            let parsed = parse_line(&line);
            let Ok(Line::Tick { symbol, quote }) = parsed else {
                return Err(TestCaseError::fail(format!("{:?} -> {parsed:?}", String::from_utf8_lossy(&line))));
            };
            prop_assert_eq!(symbol, t.symbol.as_bytes());
            prop_assert_eq!(quote.ts_ns, t.ts);
            let got = [quote.bid, quote.ask, quote.bid_qty, quote.ask_qty];
            for (d, n) in got.iter().zip(&t.nums) {
                let mut text = Vec::new();
                d.append_to(&mut text);
                if n.canonical {
                    prop_assert_eq!(String::from_utf8(text).unwrap(), n.text.clone());
                    prop_assert_eq!(*d, n.value);
                } else {
                    prop_assert_eq!(d.cmp_value(&n.value), std::cmp::Ordering::Equal);
                    prop_assert_eq!(parse_decimal(&text), Ok(*d));
                }
                prop_assert_eq!(parse_decimal(n.text.as_bytes()), Ok(*d));
            }
            let stripped = line.strip_suffix(b"\r").unwrap_or(&line);
            assert_paths_agree(stripped);
            prop_assert_eq!(parse_checked(stripped), parsed);
        }

        #[test]
        fn one_empty_field_is_empty_field(t in tick(), which in 0usize..6) {
            let mut fields = t.fields();
            fields[which].clear();
            let line = fields.join(",");
            prop_assert_eq!(parse_line(line.as_bytes()), Err(PoisonReason::EmptyField));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_line(&bytes);
            assert_paths_agree(&bytes);
        }

        #[test]
        fn near_lines_never_panic_and_paths_agree(bytes in near_line()) {
            let _ = parse_line(&bytes);
            assert_paths_agree(&bytes);
        }

        #[test]
        fn mutated_ticks_paths_agree(t in tick(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
            let mut line = t.line();
            let i = at.index(line.len());
            line[i] = b;
            let _ = parse_line(&line);
            assert_paths_agree(&line);
        }

        #[test]
        fn one_edgy_field_paths_agree(t in tick(), which in 0usize..6, field in edgy_field()) {
            let mut fields = t.fields();
            fields[which] = field;
            let line = fields.join(",");
            let line = line.as_bytes();
            assert_paths_agree(line);
            // Header and comment lines are skipped before any checking
            // (regression: an edgy first field starting with `#`).
            if !line.starts_with(HEADER_PREFIX) && !line.starts_with(b"#") {
                prop_assert_eq!(parse_line(line), parse_checked(line));
            }
        }

        #[test]
        fn swar_digits_match_a_byte_loop(bytes in proptest::collection::vec(
            prop_oneof![8 => b'0'..=b'9', 1 => any::<u8>()], 0..40), start in 0u64..1000) {
            let n = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            let v = bytes[..n].iter().fold(start, |v, &b| v.wrapping_mul(10).wrapping_add(u64::from(b - b'0')));
            prop_assert_eq!(fast_digits(&bytes, start), (v, n));
        }

        #[test]
        fn parse_decimal_matches_its_text(n in num()) {
            prop_assert_eq!(parse_decimal(n.text.as_bytes()), Ok(n.value));
        }
    }
}
