//! The journal's record types and their binary payload codec.
//!
//! A payload is a type byte followed by the record's fields, little-endian,
//! strings as a `u16` length and their UTF-8 bytes:
//!
//! ```text
//!  Accepted     1 | seq u64 | id str | symbol str | side u8 | qty u64 | lane u8 | deadline_wall u64 (0 = none) | recv_wall_ns u64 | raw str
//!  Terminal     2 | id str | state u8 | reason str | cum u64 | amount u64 | attempts u32
//!  Replay       3 | id str
//!  AttemptSent  4 | id str | bridge str | fence_token u64
//!  FillApplied  5 | id str | fill_no u32 | cum u64 | amount u64
//! ```
//!
//! The framing (length, checksum) is the journal's
//! (`order/journal/segment.rs`). Decoding never panics: a short or
//! malformed payload is a [`DecodeError`].
//!
//! On the floor because the gateway and the lane workers build records
//! and the journal thread writes and reads them back.

use crate::model::lane::Lane;
use crate::model::units::{Amount, Lots, Side};

/// How an order ended, as journaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalState {
    /// Executed (`DONE`): filled, partially filled or failed at the venue.
    Done,
    /// Dead-lettered (`DEAD`).
    Dead,
    /// Past its deadline before it was sent (`EXPIRED`).
    Expired,
    /// Journaled but refused before its `ACK` (shutting down): never ran.
    Rejected,
}

/// One journal record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// An order was accepted: everything needed to re-queue it.
    Accepted {
        /// Admission number.
        seq: u64,
        /// Client order id.
        id: String,
        /// Symbol.
        symbol: String,
        /// Side.
        side: Side,
        /// Quantity.
        qty: Lots,
        /// Its lane.
        lane: Lane,
        /// Deadline, wall-clock ns, if it has one (the engine clock does
        /// not survive a restart; the wall clock does).
        deadline_wall_ns: Option<u64>,
        /// Received, wall-clock ns.
        recv_wall_ns: u64,
        /// The `NEW` line as received (dead letters and replays).
        raw: String,
    },
    /// An order reached its terminal state.
    Terminal {
        /// Client order id.
        id: String,
        /// `DONE`, `DEAD` or `EXPIRED`.
        state: TerminalState,
        /// The status or reason word of the reply (`FILLED`, `retries_exhausted`, …).
        reason: String,
        /// Cumulative lots filled.
        cum: Lots,
        /// Cumulative amount.
        amount: Amount,
        /// Attempts made.
        attempts: u32,
    },
    /// A dead-lettered order was replayed (recorded before the re-admission).
    Replay {
        /// Client order id.
        id: String,
    },
    /// An attempt was sent to a bridge under a fencing token.
    AttemptSent {
        /// Client order id.
        id: String,
        /// The bridge's name.
        bridge: String,
        /// The attempt's fencing token.
        fence_token: u64,
    },
    /// A fill was applied to an order's position.
    FillApplied {
        /// Client order id.
        id: String,
        /// The fill's number.
        fill_no: u32,
        /// Cumulative lots after it.
        cum: Lots,
        /// Cumulative amount after it.
        amount: Amount,
    },
}

/// A payload that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The payload ends inside a field.
    #[error("record truncated")]
    Short,
    /// An unknown record type, side, lane or state byte.
    #[error("unknown {what} byte {byte}")]
    Unknown {
        /// Which field.
        what: &'static str,
        /// Its value.
        byte: u8,
    },
    /// A string is not UTF-8.
    #[error("string is not UTF-8")]
    Utf8,
    /// Bytes left over after the record.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Longest string field, bytes (ids and symbols are far shorter).
pub const MAX_STR: usize = u16::MAX as usize;

impl Record {
    /// Appends the payload to `out`.
    ///
    /// # Panics
    /// A string field longer than [`MAX_STR`] bytes (the gateway's line
    /// limit keeps them far below it).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Record::Accepted {
                seq,
                id,
                symbol,
                side,
                qty,
                lane,
                deadline_wall_ns,
                recv_wall_ns,
                raw,
            } => {
                out.push(1);
                put_u64(out, *seq);
                put_str(out, id);
                put_str(out, symbol);
                out.push(match side {
                    Side::Buy => 0,
                    Side::Sell => 1,
                });
                put_u64(out, qty.0);
                out.push(lane.index() as u8);
                put_u64(out, deadline_wall_ns.unwrap_or(0));
                put_u64(out, *recv_wall_ns);
                put_str(out, raw);
            }
            Record::Terminal {
                id,
                state,
                reason,
                cum,
                amount,
                attempts,
            } => {
                out.push(2);
                put_str(out, id);
                out.push(*state as u8);
                put_str(out, reason);
                put_u64(out, cum.0);
                put_u64(out, amount.0);
                out.extend_from_slice(&attempts.to_le_bytes());
            }
            Record::Replay { id } => {
                out.push(3);
                put_str(out, id);
            }
            Record::AttemptSent {
                id,
                bridge,
                fence_token,
            } => {
                out.push(4);
                put_str(out, id);
                put_str(out, bridge);
                put_u64(out, *fence_token);
            }
            Record::FillApplied {
                id,
                fill_no,
                cum,
                amount,
            } => {
                out.push(5);
                put_str(out, id);
                out.extend_from_slice(&fill_no.to_le_bytes());
                put_u64(out, cum.0);
                put_u64(out, amount.0);
            }
        }
    }

    /// Decodes one whole payload.
    ///
    /// # Errors
    /// A payload that is short, has trailing bytes or an unknown tag.
    pub fn decode(payload: &[u8]) -> Result<Record, DecodeError> {
        let mut r = Reader(payload);
        let rec = match r.u8()? {
            1 => Record::Accepted {
                seq: r.u64()?,
                id: r.str()?,
                symbol: r.str()?,
                side: match r.u8()? {
                    0 => Side::Buy,
                    1 => Side::Sell,
                    byte => return Err(DecodeError::Unknown { what: "side", byte }),
                },
                qty: Lots(r.u64()?),
                lane: match r.u8()? {
                    0 => Lane::Small,
                    1 => Lane::Large,
                    byte => return Err(DecodeError::Unknown { what: "lane", byte }),
                },
                deadline_wall_ns: Some(r.u64()?).filter(|&d| d != 0),
                recv_wall_ns: r.u64()?,
                raw: r.str()?,
            },
            2 => Record::Terminal {
                id: r.str()?,
                state: match r.u8()? {
                    0 => TerminalState::Done,
                    1 => TerminalState::Dead,
                    2 => TerminalState::Expired,
                    3 => TerminalState::Rejected,
                    byte => {
                        return Err(DecodeError::Unknown {
                            what: "state",
                            byte,
                        })
                    }
                },
                reason: r.str()?,
                cum: Lots(r.u64()?),
                amount: Amount(r.u64()?),
                attempts: r.u32()?,
            },
            3 => Record::Replay { id: r.str()? },
            4 => Record::AttemptSent {
                id: r.str()?,
                bridge: r.str()?,
                fence_token: r.u64()?,
            },
            5 => Record::FillApplied {
                id: r.str()?,
                fill_no: r.u32()?,
                cum: Lots(r.u64()?),
                amount: Amount(r.u64()?),
            },
            byte => {
                return Err(DecodeError::Unknown {
                    what: "record type",
                    byte,
                })
            }
        };
        if !r.0.is_empty() {
            return Err(DecodeError::Trailing(r.0.len()));
        }
        Ok(rec)
    }
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    assert!(s.len() <= MAX_STR, "journal string of {} bytes", s.len());
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A cursor over a payload.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Short);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }

    fn str(&mut self) -> Result<String, DecodeError> {
        let b = self.take(2)?;
        let n = u16::from_le_bytes([b[0], b[1]]) as usize;
        let s = std::str::from_utf8(self.take(n)?).map_err(|_| DecodeError::Utf8)?;
        Ok(s.to_owned())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The `Terminal` record of an order `k1` dead-lettered after
    /// `attempts` (recovery's and the restored `STATUS`'s tests).
    pub(crate) fn dead_k1(attempts: u32) -> Record {
        Record::Terminal {
            id: "k1".into(),
            state: TerminalState::Dead,
            reason: "retries_exhausted".into(),
            cum: Lots(0),
            amount: Default::default(),
            attempts,
        }
    }

    /// One record of each type.
    pub(crate) fn samples() -> Vec<Record> {
        vec![
            Record::Accepted {
                seq: 7,
                id: "k100".into(),
                symbol: "EURUSD".into(),
                side: Side::Sell,
                qty: Lots(250),
                lane: Lane::Large,
                deadline_wall_ns: Some(99),
                recv_wall_ns: 1_700_000_000_000_000_000,
                raw: "NEW k100 EURUSD SELL 2.5 ttl=2s".into(),
            },
            Record::Terminal {
                id: "k100".into(),
                state: TerminalState::Dead,
                reason: "retries_exhausted".into(),
                cum: Lots(100),
                amount: Amount(123_456),
                attempts: 5,
            },
            Record::Replay { id: "k100".into() },
            Record::AttemptSent {
                id: "k100".into(),
                bridge: "sim1".into(),
                fence_token: 42,
            },
            Record::FillApplied {
                id: "k100".into(),
                fill_no: 3,
                cum: Lots(50),
                amount: Amount(777),
            },
        ]
    }

    #[test]
    fn every_record_type_round_trips() {
        for rec in samples() {
            let mut buf = Vec::new();
            rec.encode(&mut buf);
            assert_eq!(Record::decode(&buf), Ok(rec.clone()));
            // Every strict prefix is short, never a panic or a wrong record.
            for cut in 0..buf.len() {
                assert!(Record::decode(&buf[..cut]).is_err(), "{rec:?} cut at {cut}");
            }
            buf.push(0);
            assert_eq!(Record::decode(&buf), Err(DecodeError::Trailing(1)));
        }
    }

    #[test]
    fn unknown_tags_are_errors() {
        assert_eq!(
            Record::decode(&[9]),
            Err(DecodeError::Unknown {
                what: "record type",
                byte: 9
            })
        );
    }
}
