//! The message payload: the tick as received, then the symbol's update
//! sequence number and the engine's receive time.
//!
//! ```text
//! ts_ns,symbol,bid,ask,bid_qty,ask_qty,seq,recv_ns
//! 1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,42,1701388800123999999
//! ```
//!
//! Encoded once per update; the RESP tail built from it is shared by every
//! subscriber of the symbol (see [`crate::protocol::resp`]).

use crate::model::tick::SlotValue;

/// Most bytes a payload can take for a symbol of `symbol_len` bytes: four
/// decimals (up to 21 bytes each), three u64 (20 each), seven commas.
pub(crate) const fn max_payload_len(symbol_len: usize) -> usize {
    symbol_len + 4 * 21 + 3 * 20 + 7
}

/// Appends the CSV payload of `v` for `symbol` to `out` (no allocation when
/// `out` has [`max_payload_len`] bytes of room).
pub fn append_payload(out: &mut Vec<u8>, symbol: &[u8], v: &SlotValue) {
    let mut int = itoa::Buffer::new();
    let q = &v.quote;
    out.extend_from_slice(int.format(q.ts_ns).as_bytes());
    out.push(b',');
    out.extend_from_slice(symbol);
    out.push(b',');
    q.bid.append_to(out);
    out.push(b',');
    q.ask.append_to(out);
    out.push(b',');
    q.bid_qty.append_to(out);
    out.push(b',');
    q.ask_qty.append_to(out);
    out.push(b',');
    out.extend_from_slice(int.format(v.seq).as_bytes());
    out.push(b',');
    out.extend_from_slice(int.format(v.recv_wall_ns).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::decimal::Decimal;
    use crate::model::tick::Quote;

    #[test]
    fn payload_keeps_the_digits_as_received() {
        let v = SlotValue {
            quote: Quote {
                ts_ns: 1701388800123456789,
                bid: Decimal::new(108512, 5),
                ask: Decimal::new(108515, 5),
                bid_qty: Decimal::new(1000000, 0),
                ask_qty: Decimal::new(1500000, 0),
            },
            seq: 42,
            recv_wall_ns: 1701388800123999999,
            recv_mono_ns: 5,
        };
        let mut out = Vec::new();
        append_payload(&mut out, b"EURUSD", &v);
        assert_eq!(
            out,
            b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,42,1701388800123999999"
        );
        assert!(out.len() <= max_payload_len(6));
    }
}
