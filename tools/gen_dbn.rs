//! `tickfan gen --dbn`: the generator's ticks as Databento DBN, for trying
//! `replay` on a vendor format and for its tests and benchmarks (a stream
//! of any length, written as it is generated: `perf/replay_formats.sh`
//! pipes 10 GB of it through a FIFO).
//!
//! The stream: DBN v3 metadata (dataset `TICKFAN.GEN`, schema `mbp-1`,
//! `stype_out` instrument ids, no mappings in the metadata), then one
//! `SymbolMappingMsg` per symbol (instrument id `i + 1` is the symbol's
//! name, its `stype_out_symbol`, for all time, as a live DBN stream
//! announces its symbols), then one
//! `Mbp1Msg` per tick: `ts_event` = `ts_recv` = the tick's `ts_ns`, the
//! top level's prices in DBN's 1e-9 fixed point and sizes (quantities past
//! `u32::MAX` saturate). zstd level 1, single-threaded.

use std::io::{self, Write};

use dbn::encode::{DbnEncoder, EncodeRecord};
use dbn::{rtype, BidAskPair, Mbp1Msg, Metadata, RecordHeader, SType, Schema, SymbolMappingMsg};

use super::gen::{GenSpec, Limit, TickGen};

/// Writes the ticks of `spec` up to `limit` as a zstd-compressed DBN
/// mbp-1 stream; returns the tick count.
///
/// # Errors
/// The sink's I/O error, or the DBN encoder's.
pub fn write_dbn(spec: &GenSpec, limit: Limit, sink: impl Write) -> io::Result<u64> {
    let metadata = Metadata::builder()
        .dataset("TICKFAN.GEN")
        .schema(Some(Schema::Mbp1))
        .start(spec.start_ns)
        .stype_in(Some(SType::RawSymbol))
        .stype_out(SType::InstrumentId)
        .build();
    let mut zst =
        zstd::stream::write::Encoder::new(io::BufWriter::with_capacity(256 * 1024, sink), 1)?;
    let mut enc = DbnEncoder::new(&mut zst, &metadata).map_err(io::Error::other)?;
    let mut g = TickGen::new(spec);
    for i in 0..spec.symbols {
        let id = instrument_id(i);
        let m = SymbolMappingMsg::new(
            id,
            spec.start_ns,
            SType::RawSymbol,
            g.name(i),
            SType::RawSymbol,
            g.name(i),
            0,
            u64::MAX,
        )
        .map_err(io::Error::other)?;
        enc.encode_record(&m).map_err(io::Error::other)?;
    }
    let mut n = 0u64;
    while !limit.reached(n, g.elapsed_ns()) {
        let q = g.next_quote();
        let scale = 10i64.pow(9 - q.decimals);
        let size = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let rec = Mbp1Msg {
            hd: RecordHeader::new::<Mbp1Msg>(rtype::MBP_1, 0, instrument_id(q.symbol), q.ts_ns),
            ts_recv: q.ts_ns,
            levels: [BidAskPair {
                bid_px: q.bid * scale,
                ask_px: q.ask * scale,
                bid_sz: size(q.bid_qty),
                ask_sz: size(q.ask_qty),
                bid_ct: 1,
                ask_ct: 1,
            }],
            ..Mbp1Msg::default()
        };
        enc.encode_record(&rec).map_err(io::Error::other)?;
        n += 1;
    }
    // `enc` (which borrows `zst`) is done: finish the frame.
    let mut buffered = zst.finish()?;
    buffered.flush()?;
    Ok(n)
}

/// The instrument id of symbol `i`.
fn instrument_id(i: usize) -> u32 {
    u32::try_from(i + 1).expect("at most 10,000,000 symbols")
}
