//! What travels on the backbone, and its checks.
//!
//! - **Update** on `<prefix>.md.<symbol>`: the payload exactly as a
//!   subscriber of the ingest receives it
//!   (`ts_ns,symbol,bid,ask,bid_qty,ask_qty,seq,recv_ns`, see
//!   [`crate::protocol::encode`]) with the header `Tickfan-Epoch: <u64>`,
//!   the ingest's source epoch.
//! - **Snapshot reply** to a request on `<prefix>.snap.<symbol>`:
//!   `snap <symbol> <epoch> <seq> <payload>` or `none <symbol>` when the
//!   ingest holds no value of that symbol.
//!
//! Everything from the backbone is checked before it may reach a slot: the
//! payload parses (the feed's own tick parser for its first six fields), its
//! symbol is the subject's (or the request's), the numbers agree. A failure
//! is a [`BackboneDrop`] reason, counted by the caller; nothing here panics
//! on input.

use crate::feed::parse::{ascii_u64, parse_line, Line};
use crate::metrics::cluster_counters::BackboneDrop;
use crate::model::tick::Quote;

/// The header carrying the source epoch of an update.
pub(crate) const EPOCH_HEADER: &str = "Tickfan-Epoch";

/// One symbol's value as the backbone carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Update {
    /// The tick as received by the ingest.
    pub quote: Quote,
    /// The ingest's per-symbol sequence number.
    pub seq: u64,
    /// The ingest's receive time (wall clock, ns): kept, so freshness is
    /// measured from the ingest's receipt.
    pub recv_wall_ns: u64,
    /// The ingest incarnation that sent it.
    pub epoch: u64,
}

/// What a snapshot request got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SnapReply {
    /// The ingest's latest value.
    Value(Update),
    /// The ingest has no value of the symbol.
    None,
}

/// Parses an update's payload for `symbol` (the subject's).
pub(crate) fn parse_update(
    symbol: &[u8],
    epoch: Option<&str>,
    payload: &[u8],
) -> Result<Update, BackboneDrop> {
    let epoch = epoch
        .ok_or(BackboneDrop::MissingEpoch)?
        .trim()
        .parse::<u64>()
        .map_err(|_| BackboneDrop::MissingEpoch)?;
    parse_payload(symbol, epoch, payload)
}

fn parse_payload(symbol: &[u8], epoch: u64, payload: &[u8]) -> Result<Update, BackboneDrop> {
    // The last two fields are ours (seq, recv_ns); the first six the tick's.
    let mut commas = memchr::memrchr_iter(b',', payload);
    let last = commas.next().ok_or(BackboneDrop::Malformed)?;
    let before = commas.next().ok_or(BackboneDrop::Malformed)?;
    let tick = &payload[..before];
    let seq = ascii_u64(&payload[before + 1..last]).ok_or(BackboneDrop::Malformed)?;
    let recv_wall_ns = ascii_u64(&payload[last + 1..]).ok_or(BackboneDrop::Malformed)?;
    match parse_line(tick) {
        Ok(Line::Tick { symbol: s, quote }) if seq > 0 => {
            if s != symbol {
                return Err(BackboneDrop::WrongSymbol);
            }
            Ok(Update {
                quote,
                seq,
                recv_wall_ns,
                epoch,
            })
        }
        _ => Err(BackboneDrop::Malformed),
    }
}

/// Appends the snapshot reply carrying `payload` (seq `seq`) of `symbol`.
pub(crate) fn encode_snap(out: &mut Vec<u8>, symbol: &[u8], epoch: u64, seq: u64, payload: &[u8]) {
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(b"snap ");
    out.extend_from_slice(symbol);
    out.push(b' ');
    out.extend_from_slice(n.format(epoch).as_bytes());
    out.push(b' ');
    out.extend_from_slice(n.format(seq).as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
}

/// Appends the reply for a symbol the ingest holds no value of.
pub(crate) fn encode_none(out: &mut Vec<u8>, symbol: &[u8]) {
    out.extend_from_slice(b"none ");
    out.extend_from_slice(symbol);
}

/// Parses a snapshot reply to a request for `symbol`.
pub(crate) fn parse_snap(symbol: &[u8], reply: &[u8]) -> Result<SnapReply, BackboneDrop> {
    let mut parts = reply.splitn(5, |&b| b == b' ');
    let kind = parts.next().ok_or(BackboneDrop::Malformed)?;
    let sym = parts.next().ok_or(BackboneDrop::Malformed)?;
    match kind {
        b"none" if parts.next().is_none() => {
            if sym == symbol {
                Ok(SnapReply::None)
            } else {
                Err(BackboneDrop::WrongSymbol)
            }
        }
        b"snap" => {
            let epoch = parts.next().and_then(ascii_u64);
            let seq = parts.next().and_then(ascii_u64);
            let payload = parts.next();
            let (Some(epoch), Some(seq), Some(payload)) = (epoch, seq, payload) else {
                return Err(BackboneDrop::Malformed);
            };
            if sym != symbol {
                return Err(BackboneDrop::WrongSymbol);
            }
            let u = parse_payload(symbol, epoch, payload)?;
            if u.seq != seq {
                return Err(BackboneDrop::Malformed);
            }
            Ok(SnapReply::Value(u))
        }
        _ => Err(BackboneDrop::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &[u8] =
        b"1701388800123456789,EURUSD,1.08512,1.08515,1000000,1500000,42,1701388800123999999";

    #[test]
    fn an_update_keeps_the_digits_seq_and_epoch() {
        let u = parse_update(b"EURUSD", Some("7"), P).unwrap();
        assert_eq!(
            (u.seq, u.epoch, u.recv_wall_ns),
            (42, 7, 1701388800123999999)
        );
        let mut out = Vec::new();
        crate::protocol::encode::append_payload(
            &mut out,
            b"EURUSD",
            &crate::model::tick::SlotValue {
                quote: u.quote,
                seq: u.seq,
                recv_wall_ns: u.recv_wall_ns,
                recv_mono_ns: 0,
            },
        );
        assert_eq!(out, P, "re-encoded as received");
    }

    #[test]
    fn bad_updates_are_refused_with_their_reason() {
        use BackboneDrop as D;
        assert_eq!(parse_update(b"EURUSD", None, P), Err(D::MissingEpoch));
        assert_eq!(parse_update(b"EURUSD", Some("x"), P), Err(D::MissingEpoch));
        assert_eq!(parse_update(b"GBPUSD", Some("1"), P), Err(D::WrongSymbol));
        for bad in [
            &b"garbage"[..],
            b"",
            b"1,EURUSD,1,2,3,4,x,5",
            b"1,EURUSD,1,2,3,4,0,5",
            b"1,EURUSD,-1,2,3,4,5,6",
            b"1,EURUSD,1,2,3,5,6",
            b"\xff\xfe,,",
        ] {
            assert_eq!(
                parse_update(b"EURUSD", Some("1"), bad),
                Err(D::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn snapshot_replies_round_trip_and_are_checked() {
        let mut out = Vec::new();
        encode_snap(&mut out, b"EURUSD", 9, 42, P);
        match parse_snap(b"EURUSD", &out).unwrap() {
            SnapReply::Value(u) => assert_eq!((u.seq, u.epoch), (42, 9)),
            SnapReply::None => panic!("a value was sent"),
        }
        assert_eq!(parse_snap(b"GBPUSD", &out), Err(BackboneDrop::WrongSymbol));
        out.clear();
        encode_snap(&mut out, b"EURUSD", 9, 41, P);
        assert_eq!(parse_snap(b"EURUSD", &out), Err(BackboneDrop::Malformed));
        out.clear();
        encode_none(&mut out, b"EURUSD");
        assert_eq!(parse_snap(b"EURUSD", &out), Ok(SnapReply::None));
        assert_eq!(parse_snap(b"USDJPY", &out), Err(BackboneDrop::WrongSymbol));
        assert_eq!(parse_snap(b"EURUSD", b"what"), Err(BackboneDrop::Malformed));
        assert_eq!(
            parse_snap(b"EURUSD", b"snap EURUSD 1"),
            Err(BackboneDrop::Malformed)
        );
    }
}
