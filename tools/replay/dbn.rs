//! Databento DBN, versions 1–3, plain or zstd (`.dbn`, `.dbn.zst`): the
//! quote schemas become tickfan quotes. Decoding is the `dbn` crate's
//! (`DbnDecoder`, `TsSymbolMap`); what is written here is the mapping of
//! one record to one quote line.
//!
//! | schema | record | quote |
//! |---|---|---|
//! | `mbp-1`, `tbbo` | `Mbp1Msg` | `levels[0]`: `bid_px`, `ask_px`, `bid_sz`, `ask_sz` |
//! | `bbo-1s`, `bbo-1m` | `BboMsg` | the same |
//! | `cmbp-1`, `tcbbo` | `Cmbp1Msg` | the same (consolidated level) |
//! | `cbbo-1s`, `cbbo-1m` | `CbboMsg` | the same |
//!
//! The line is `ts_ns,symbol,bid,ask,bid_qty,ask_qty`: `ts_ns` is `ts_recv`
//! (default) or `hd.ts_event` (`--ts event`); prices are DBN's fixed-point
//! `i64` in units of 1e-9, written as the shortest exact decimal
//! (`1085120000` → `1.08512`); sizes are the `u32`s. The symbol is the
//! file's own symbology at the record's `ts_recv` (the metadata's symbol
//! mappings, updated by any `SymbolMappingMsg` in the stream; the
//! instrument id in decimal where the file maps none), then `--symbol-map`.
//!
//! A file whose metadata names another schema (trades, ohlcv, mbo…) is
//! refused at open, naming it. In a file of mixed schemas (no schema in
//! the metadata) a record of another kind is skipped as `not_a_quote`;
//! symbol-mapping and system (heartbeat) records are read silently.
//!
//! **Truncation.** The crate's decoder takes a reader's end inside a record
//! for the end of the file; here every record's size is added up, so a
//! stream that ends with bytes that are not a whole record is reported as
//! `truncated` (and a `.zst` cut short, as the [`Guard`] saw it).
//!
//! [`Guard`]: super::source::Guard

use dbn::decode::{DbnDecoder, DbnMetadata};
use dbn::{
    rtype, BboMsg, CbboMsg, Cmbp1Msg, Mbp1Msg, RType, Record, RecordRef, Schema, TsSymbolMap,
    VersionUpgradePolicy, UNDEF_PRICE, UNDEF_TIMESTAMP,
};
use rustc_hash::FxHashMap;

use tickfan::error::Failure;

use super::skips::{Reason, Skip, Unit};
use super::source::{DecodeOptions, Step, Stream, TsField};
use super::symbol_map::{valid_symbol, SymbolMap};

/// The schemas whose records carry a best bid and offer.
pub const QUOTE_SCHEMAS: [Schema; 8] = [
    Schema::Mbp1,
    Schema::Tbbo,
    Schema::Bbo1S,
    Schema::Bbo1M,
    Schema::Cmbp1,
    Schema::Tcbbo,
    Schema::Cbbo1S,
    Schema::Cbbo1M,
];

/// The DBN versions this build reads.
pub const VERSIONS: std::ops::RangeInclusive<u8> = 1..=3;

/// Bytes before the metadata: `DBN`, the version byte, a `u32` length.
const PRELUDE_LEN: u64 = 8;

/// The best bid and offer of one record, before it is written.
#[derive(Debug, Clone, Copy)]
struct Bbo {
    ts_event: u64,
    ts_recv: u64,
    instrument_id: u32,
    bid_px: i64,
    ask_px: i64,
    bid_sz: u32,
    ask_sz: u32,
}

/// The symbol an instrument has over `[start, end)` of `ts_recv`, as sent
/// (renamed), or why it cannot be.
#[derive(Debug, Clone)]
struct Named {
    start: u64,
    end: u64,
    symbol: Result<Vec<u8>, String>,
}

/// Quotes of a DBN stream.
pub struct DbnSource {
    dec: DbnDecoder<Stream>,
    /// The version byte of the file.
    version: u8,
    schema: Option<Schema>,
    dataset: String,
    ts: TsField,
    /// The file's symbology (metadata, then in-stream mappings).
    map: TsSymbolMap,
    /// Per instrument id, the interval last looked up.
    named: FxHashMap<u32, Named>,
    renames: SymbolMap,
    /// Records read (the number of the current one; metadata is 0).
    record: u64,
    /// Bytes of the stream accounted for: prelude, metadata, records.
    consumed: u64,
    done: bool,
}

impl std::fmt::Debug for DbnSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbnSource")
            .field("version", &self.version)
            .field("schema", &self.schema)
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

impl DbnSource {
    /// Decodes the metadata of `stream` (whose first bytes are `DBN` and
    /// `version`).
    ///
    /// # Errors
    /// (Usage errors, in the skip line's shape: `replay: FILE: record 0:
    /// reason`.) A version outside [`VERSIONS`] (`unknown_version`); a
    /// schema not in [`QUOTE_SCHEMAS`]; metadata that cannot be decoded.
    pub fn new(
        name: &str,
        stream: Stream,
        version: u8,
        opts: &DecodeOptions,
    ) -> Result<DbnSource, Failure> {
        if !VERSIONS.contains(&version) {
            return Err(Failure::Usage(format!(
                "replay: {name}: record 0: unknown_version (DBN version {version}; this build reads versions {}-{})",
                VERSIONS.start(),
                VERSIONS.end()
            )));
        }
        let meta_len = {
            let head = stream.get_ref().0.get_ref();
            match head.get(4..8) {
                Some(b) => u32::from_le_bytes(b.try_into().expect("4 bytes")),
                None => 0,
            }
        };
        let dec = match DbnDecoder::with_upgrade_policy(stream, VersionUpgradePolicy::AsIs) {
            Ok(d) => d,
            Err(e) => {
                return Err(Failure::Usage(format!(
                    "replay: {name}: record 0: corrupt (DBN metadata: {e})"
                )))
            }
        };
        let meta = dec.metadata();
        if let Some(s) = meta.schema {
            if !QUOTE_SCHEMAS.contains(&s) {
                let names: Vec<&str> = QUOTE_SCHEMAS.iter().map(|s| s.as_str()).collect();
                return Err(Failure::Usage(format!(
                    "replay: {name}: DBN schema {} holds no quotes; replay takes {}",
                    s.as_str(),
                    names.join(", ")
                )));
            }
        }
        // A file whose symbology the crate cannot index (neither side
        // instrument ids) still replays, under instrument ids.
        let map = TsSymbolMap::from_metadata(meta).unwrap_or_default();
        Ok(DbnSource {
            version,
            schema: meta.schema,
            dataset: meta.dataset.clone(),
            dec,
            ts: opts.ts,
            map,
            named: FxHashMap::default(),
            renames: opts.symbols.clone(),
            record: 0,
            consumed: PRELUDE_LEN + u64::from(meta_len),
            done: false,
        })
    }

    /// `DBN v3 mbp-1 (GLBX.MDP3)`.
    pub fn describe(&self) -> String {
        format!(
            "DBN v{} {} ({})",
            self.version,
            self.schema.map_or("mixed schemas", |s| s.as_str()),
            self.dataset
        )
    }

    /// The next quote line, or why the next record is skipped.
    pub fn next_line(&mut self, line: &mut Vec<u8>) -> Step {
        loop {
            if self.done {
                return Step::End;
            }
            let rec = match self.dec.decode_ref() {
                Ok(Some(rec)) => rec,
                Ok(None) => return self.end(),
                Err(e) => {
                    self.done = true;
                    let guard = &self.dec.get_ref().get_ref().1;
                    let number = self.record + 1;
                    return Step::Skipped(guard.failure(Unit::Record, number).unwrap_or(Skip {
                        unit: Unit::Record,
                        number,
                        reason: Reason::Corrupt,
                        detail: e.to_string(),
                    }));
                }
            };
            self.record += 1;
            self.consumed += rec.record_size() as u64;
            // Every quote schema's record has the same top-of-book fields
            // under its own type: one mapping for all of them.
            macro_rules! top_of_book {
                ($msg:ty) => {
                    rec.get::<$msg>().map(|r| {
                        let l = &r.levels[0];
                        bbo(
                            r.hd.ts_event,
                            r.ts_recv,
                            r.hd.instrument_id,
                            l.bid_px,
                            l.ask_px,
                            l.bid_sz,
                            l.ask_sz,
                        )
                    })
                };
            }
            let bbo = match rec.header().rtype {
                rtype::MBP_1 => top_of_book!(Mbp1Msg),
                rtype::BBO_1S | rtype::BBO_1M => top_of_book!(BboMsg),
                rtype::CMBP_1 | rtype::TCBBO => top_of_book!(Cmbp1Msg),
                rtype::CBBO_1S | rtype::CBBO_1M => top_of_book!(CbboMsg),
                rtype::SYMBOL_MAPPING => {
                    on_mapping(&mut self.map, &mut self.named, rec);
                    continue;
                }
                rtype::SYSTEM => continue,
                other => {
                    let (reason, detail) = match RType::try_from(other) {
                        Ok(t) => (
                            Reason::NotAQuote,
                            format!("{t:?} record, rtype {other:#04x}"),
                        ),
                        Err(_) => (
                            Reason::UnknownRecord,
                            format!(
                                "rtype {other:#04x} is unknown to DBN 1-3; {} bytes skipped",
                                rec.record_size()
                            ),
                        ),
                    };
                    return Step::Skipped(Skip {
                        unit: Unit::Record,
                        number: self.record,
                        reason,
                        detail,
                    });
                }
            };
            let Some(b) = bbo else {
                // A quote rtype whose length is too short for its record.
                return Step::Skipped(Skip {
                    unit: Unit::Record,
                    number: self.record,
                    reason: Reason::Corrupt,
                    detail: "record shorter than its type".into(),
                });
            };
            return match self.write(&b, line) {
                Ok(()) => Step::Line,
                Err((reason, detail)) => {
                    line.clear();
                    Step::Skipped(Skip {
                        unit: Unit::Record,
                        number: self.record,
                        reason,
                        detail,
                    })
                }
            };
        }
    }

    /// The decoder found no more records: a clean end, unless the stream
    /// failed or left bytes that are not a whole record.
    fn end(&mut self) -> Step {
        self.done = true;
        let guard = &self.dec.get_ref().get_ref().1;
        let number = self.record + 1;
        if let Some(skip) = guard.failure(Unit::Record, number) {
            return Step::Skipped(skip);
        }
        let left = guard.bytes().saturating_sub(self.consumed);
        if left > 0 {
            return Step::Skipped(Skip {
                unit: Unit::Record,
                number,
                reason: Reason::Truncated,
                detail: format!("the file ends {left} bytes into the record"),
            });
        }
        Step::End
    }

    /// Writes the quote of `b` into `line`.
    fn write(&mut self, b: &Bbo, line: &mut Vec<u8>) -> Result<(), (Reason, String)> {
        let ts = match self.ts {
            TsField::Event => b.ts_event,
            TsField::Recv => b.ts_recv,
        };
        if ts == UNDEF_TIMESTAMP {
            let which = if self.ts == TsField::Event {
                "ts_event"
            } else {
                "ts_recv"
            };
            return Err((Reason::UndefinedTimestamp, which.into()));
        }
        if b.bid_px == UNDEF_PRICE || b.ask_px == UNDEF_PRICE {
            let side = if b.bid_px == UNDEF_PRICE {
                "bid"
            } else {
                "ask"
            };
            return Err((Reason::UndefinedPrice, format!("{side} side empty")));
        }
        if b.bid_px <= 0 || b.ask_px <= 0 {
            return Err((
                Reason::NonPositivePrice,
                format!("bid_px {} ask_px {}", b.bid_px, b.ask_px),
            ));
        }
        let symbol = self.symbol(b.instrument_id, b.ts_recv)?;
        let mut num = itoa::Buffer::new();
        line.extend_from_slice(num.format(ts).as_bytes());
        line.push(b',');
        line.extend_from_slice(symbol);
        line.push(b',');
        push_price(line, b.bid_px);
        line.push(b',');
        push_price(line, b.ask_px);
        line.push(b',');
        line.extend_from_slice(num.format(b.bid_sz).as_bytes());
        line.push(b',');
        line.extend_from_slice(num.format(b.ask_sz).as_bytes());
        Ok(())
    }

    /// The symbol sent for `id` at `ts`: cached per instrument for the
    /// interval of the file's symbology that holds `ts`.
    fn symbol(&mut self, id: u32, ts: u64) -> Result<&[u8], (Reason, String)> {
        let hit = self
            .named
            .get(&id)
            .is_some_and(|n| n.start <= ts && ts < n.end);
        if !hit {
            let named = lookup(&self.map, &self.renames, id, ts);
            self.named.insert(id, named);
        }
        match &self.named[&id].symbol {
            Ok(s) => Ok(s),
            Err(why) => Err((Reason::BadSymbol, why.clone())),
        }
    }
}

#[allow(clippy::too_many_arguments)] // reason: the six fields of a quote, named at each call
fn bbo(
    ts_event: u64,
    ts_recv: u64,
    instrument_id: u32,
    bid_px: i64,
    ask_px: i64,
    bid_sz: u32,
    ask_sz: u32,
) -> Bbo {
    Bbo {
        ts_event,
        ts_recv,
        instrument_id,
        bid_px,
        ask_px,
        bid_sz,
        ask_sz,
    }
}

/// Adds an in-stream symbol mapping and forgets the cached name of its
/// instrument.
fn on_mapping(map: &mut TsSymbolMap, named: &mut FxHashMap<u32, Named>, rec: RecordRef<'_>) {
    if map.on_record(rec).is_ok() {
        named.remove(&rec.header().instrument_id);
    }
}

/// The name of `id` at `ts` in `map`, renamed, and the interval it holds
/// for (between the neighbouring intervals where the file maps none).
fn lookup(map: &TsSymbolMap, renames: &SymbolMap, id: u32, ts: u64) -> Named {
    let intervals = map.inner().get(&id).map(|i| i.intervals()).unwrap_or(&[]);
    let (mut start, mut end, mut file_symbol) = (0u64, u64::MAX, None);
    for i in intervals {
        if i.start_ts <= ts && ts < i.end_ts {
            (start, end, file_symbol) = (i.start_ts, i.end_ts, Some(i.symbol.as_str()));
            break;
        }
        if i.end_ts <= ts {
            start = start.max(i.end_ts);
        } else if i.start_ts > ts {
            end = end.min(i.start_ts);
        }
    }
    let id_text = id.to_string();
    let from = file_symbol.unwrap_or(&id_text);
    let sent = renames.rename(from.as_bytes());
    let symbol = if valid_symbol(sent) {
        Ok(sent.to_vec())
    } else {
        Err(format!(
            "`{}` (instrument {id}) is not 1-24 printable bytes; rename it with --symbol-map",
            String::from_utf8_lossy(sent)
        ))
    };
    Named { start, end, symbol }
}

/// Writes a DBN fixed-point price (units of 1e-9) as the shortest exact
/// decimal: `1085120000` → `1.08512`, `5000000000` → `5`.
pub fn push_price(out: &mut Vec<u8>, px: i64) {
    if px < 0 {
        out.push(b'-');
    }
    let v = px.unsigned_abs();
    let (int, frac) = (v / 1_000_000_000, v % 1_000_000_000);
    let mut num = itoa::Buffer::new();
    out.extend_from_slice(num.format(int).as_bytes());
    if frac != 0 {
        out.push(b'.');
        let digits = num.format(frac).as_bytes();
        out.extend(std::iter::repeat_n(b'0', 9 - digits.len()));
        out.extend_from_slice(digits);
        while out.last() == Some(&b'0') {
            out.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_are_the_shortest_exact_decimal() {
        let s = |px| {
            let mut v = Vec::new();
            push_price(&mut v, px);
            String::from_utf8(v).unwrap()
        };
        assert_eq!(s(1_085_120_000), "1.08512");
        assert_eq!(s(5_000_000_000), "5");
        assert_eq!(s(1), "0.000000001");
        assert_eq!(s(3_720_250_000_000), "3720.25");
        assert_eq!(s(-1_500_000_000), "-1.5");
        assert_eq!(s(i64::MAX - 1), "9223372036.854775806");
    }
}
