//! Fuzz the tick parser: never panics, and a line it accepts re-encodes to
//! numbers equal to what it parsed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickfan::feed::parse::{parse_decimal, parse_line, Line};

fuzz_target!(|data: &[u8]| {
    if let Ok(Line::Tick { symbol, quote }) = parse_line(data) {
        assert!(!symbol.is_empty() && symbol.len() <= 24);
        for d in [quote.bid, quote.ask, quote.bid_qty, quote.ask_qty] {
            let mut text = Vec::new();
            d.append_to(&mut text);
            let back = parse_decimal(&text).expect("re-encoded decimal parses");
            assert_eq!(back.cmp_value(&d), std::cmp::Ordering::Equal);
        }
        assert!(!quote.bid.is_zero() && !quote.ask.is_zero());
    }
});
