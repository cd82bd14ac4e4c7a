//! `tickfan replay FILE --to ADDR`: sends a tick replay file to a feed port
//! (or, for the benchmark, to a Redis server or the raw forwarder), open
//! loop, at a fixed rate or at the file's recorded pace.
//!
//! The file may be tickfan's own CSV, Databento DBN or Tardis.dev CSV,
//! plain or compressed; it is told by its content (`--format` overrides),
//! read as a stream (memory stays flat whatever its size), and each record
//! reaches the sender as one tickfan CSV line.
//!
//! | piece | owns |
//! |---|---|
//! | [`source`] | opening: compression and format by content, the reader stack, the [`Source`] every format is read through |
//! | [`csv`] | tickfan CSV: lines passed on as they are |
//! | [`dbn`] | Databento DBN (v1–3, `.dbn`, `.dbn.zst`): quote schemas → quote lines |
//! | [`tardis`] | Tardis.dev CSV (`quotes`, `book_ticker`, `.csv.gz`): rows → quote lines |
//! | [`symbol_map`] | `--symbol-map`: renames of the file's symbols; the feed's symbol rule |
//! | [`skips`] | bad input: reasons, the one line per skipped record, `--on-error`, the tally |
//! | [`schedule`] | when each line is due: fixed rate or recorded gaps ÷ speed (open loop) |
//! | [`sender`] | stamping, encoding (`--send-as`) and writing the lines; the send-lag histogram |
//!
//! The full reference (formats, flags, mapping per schema, reasons) is
//! `docs/src/replay-formats.md`.

pub mod csv;
pub mod dbn;
pub mod schedule;
pub mod sender;
pub mod skips;
pub mod source;
pub mod symbol_map;
pub mod tardis;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use indicatif::ProgressBar;

use tickfan::error::Failure;

use super::auth;
pub use schedule::{leading_ts, pace_of, Pace};
pub use sender::{progress_bar, ReplaySummary, SendAs, Sender, SenderSettings};
use skips::{OnError, Skips};
pub use source::{DecodeOptions, InputFormat, Source, Step, TsField};
use symbol_map::SymbolMap;

/// Flags of `tickfan replay`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The tick file: tickfan CSV, Databento DBN or Tardis CSV, plain or zstd/gzip (told by content).
    pub file: PathBuf,
    /// Where to send: the engine's feed port (or Redis / the forwarder, see --send-as).
    #[arg(long, value_name = "ADDR", value_parser = tickfan::sys::net::parse_socket_addr, default_value = "127.0.0.1:9101")]
    pub to: SocketAddr,
    /// Fixed rate in lines per second (0 = as fast as possible).
    #[arg(
        long,
        value_name = "PER_SEC",
        default_value_t = 0.0,
        conflicts_with = "speed"
    )]
    pub rate: f64,
    /// Recorded pacing: the gaps of the file's timestamps (see --ts) divided by this factor (2 = twice as fast).
    #[arg(long, value_name = "FACTOR")]
    pub speed: Option<f64>,
    /// Times to send the whole file.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub loops: u64,
    /// Stop after this long even if loops remain (e.g. `10s`).
    #[arg(long, value_name = "DURATION", value_parser = super::flags::positive_duration)]
    pub duration: Option<Duration>,
    /// Rewrite ts_ns to each line's intended send time (wall clock ns).
    #[arg(long)]
    pub stamp: bool,
    /// What to send each line as.
    #[arg(long, value_enum, value_name = "AS", default_value_t = SendAs::Csv)]
    pub send_as: SendAs,
    /// The file's format: auto (by content), csv (tickfan), dbn, tardis.
    #[arg(long, value_name = "FORMAT", value_parser = InputFormat::parse, default_value = "auto")]
    pub format: InputFormat,
    /// Which vendor timestamp is the quote's ts_ns (and paces --speed): recv (DBN ts_recv, Tardis local_timestamp) or event (ts_event, timestamp).
    #[arg(long, value_name = "FIELD", value_parser = TsField::parse)]
    pub ts: Option<TsField>,
    /// Rename the file's symbols: a file of `FROM,TO` lines (DBN and Tardis files).
    #[arg(long, value_name = "PATH")]
    pub symbol_map: Option<PathBuf>,
    /// A record that cannot become a quote: skip it (count it, go on) or stop the replay (exit 1).
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = OnError::Skip)]
    pub on_error: OnError,
    /// Write the send-lag histogram (HdrHistogram interval log `replay.hlog`) into this directory.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// File holding the engine's token, presented first (`AUTH <token>`; RESP `AUTH` with --send-as redis-publish).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Write `intended_ns,symbol` per tick sent to this file (needs --stamp), for `subscribe --sent`.
    #[arg(long, value_name = "PATH", requires = "stamp")]
    pub record_sent: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: &ReplayArgs) -> Result<(), Failure> {
    let pace = pace_of(args.rate, args.speed)?;
    if args.loops == 0 {
        return Err(Failure::Usage("--loops must be at least 1".into()));
    }
    let opts = DecodeOptions {
        ts: args.ts.unwrap_or_default(),
        symbols: match &args.symbol_map {
            Some(p) => SymbolMap::load(p)?,
            None => SymbolMap::default(),
        },
    };
    let token = auth::load(args.token_file.as_deref())?;
    // Opened before connecting: a file that cannot be replayed is refused
    // (exit 2) before anything is sent.
    let first = Source::open(&args.file, args.format, &opts)?;
    if first.is_csv() && (args.ts.is_some() || args.symbol_map.is_some()) {
        return Err(Failure::Usage(format!(
            "--ts and --symbol-map apply to DBN and Tardis files; {} is tickfan CSV (sent as is)",
            args.file.display()
        )));
    }
    if !first.is_csv() {
        eprintln!(
            "replay: {}: {}, ts_ns from {}",
            args.file.display(),
            first.describe(),
            first.ts_name(args.ts.unwrap_or_default())
        );
    }
    let total = plain_line_count(&args.file, &first)?.map(|n| n * args.loops);
    let stop = tickfan::sys::signals::stop_flag()
        .map_err(|e| Failure::Runtime(format!("cannot install signal handlers: {e}")))?;
    let pb = progress_bar(total, args.no_progress);
    let input = Input {
        file: args.file.clone(),
        format: args.format,
        opts,
        on_error: args.on_error,
    };
    let (s, skips, stopped) = replay_source(
        &input,
        first,
        args.to,
        args.loops,
        SenderSettings {
            pace,
            stamp: args.stamp,
            send_as: args.send_as,
            duration: args.duration,
            log_dir: args.log_dir.clone(),
            stop: Some(stop),
            token,
            record_sent: args.record_sent.clone(),
            // The operator chose the file and the run's length.
            record_sent_max: u64::MAX,
        },
        pb,
    )?;
    eprintln!(
        "replay: sent {} lines ({} bytes) in {:.2} s ({:.0} lines/s); behind schedule p99 {:.2} ms, max {:.2} ms{}{}{}",
        s.lines,
        s.bytes,
        s.elapsed.as_secs_f64(),
        s.lines as f64 / s.elapsed.as_secs_f64().max(1e-9),
        s.p99_behind.as_secs_f64() * 1e3,
        s.max_behind.as_secs_f64() * 1e3,
        if s.skipped > 0 {
            format!("; {} non-tick lines not sent", s.skipped)
        } else {
            String::new()
        },
        if skips.total() > 0 {
            format!("; records skipped: {skips}")
        } else {
            String::new()
        },
        if args.send_as == SendAs::RedisPublish {
            format!("; {} replies", s.replies)
        } else {
            String::new()
        },
    );
    match stopped {
        Some(at) => Err(Failure::Runtime(format!(
            "replay stopped at {at} of {} (--on-error stop)",
            args.file.display()
        ))),
        None => Ok(()),
    }
}

/// Lines in a plain (uncompressed) tickfan CSV regular file, for the
/// progress bar's length; `None` for anything else (counting a compressed
/// or vendor file would mean decoding it twice; a pipe can be read once).
fn plain_line_count(file: &Path, source: &Source) -> Result<Option<u64>, Failure> {
    let plain = match source {
        Source::Csv(c) => !c.compressed(),
        _ => false,
    };
    if !plain || !std::fs::metadata(file).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let f = std::fs::File::open(file)
        .map_err(|e| Failure::Usage(format!("cannot open {}: {e}", file.display())))?;
    let mut r = BufReader::with_capacity(256 * 1024, f);
    let (mut n, mut last) = (0u64, b'\n');
    loop {
        let buf = r
            .fill_buf()
            .map_err(|e| Failure::Runtime(format!("cannot read {}: {e}", file.display())))?;
        if buf.is_empty() {
            break;
        }
        n += memchr::memchr_iter(b'\n', buf).count() as u64;
        last = *buf.last().expect("non-empty");
        let k = buf.len();
        r.consume(k);
    }
    Ok(Some(n + u64::from(last != b'\n')))
}

/// What to read and how.
#[derive(Debug, Clone)]
pub struct Input {
    /// The replay file (reopened for each loop).
    pub file: PathBuf,
    /// `--format`.
    pub format: InputFormat,
    /// `--ts`, `--symbol-map`.
    pub opts: DecodeOptions,
    /// `--on-error`.
    pub on_error: OnError,
}

/// Sends `input` to `to` `loops` times, starting with the already opened
/// `first` pass. Skipped records are told on stderr (the first pass only:
/// later passes read the same records) and counted. Returns what was sent,
/// the skips, and where `--on-error stop` stopped the run.
///
/// # Errors
/// The file cannot be reopened, the connection failed.
pub fn replay_source(
    input: &Input,
    first: Source,
    to: SocketAddr,
    loops: u64,
    settings: SenderSettings,
    progress: ProgressBar,
) -> Result<(ReplaySummary, Skips, Option<String>), Failure> {
    let name = input.file.display().to_string();
    let mut sender = Sender::connect(to, settings, progress.clone())?;
    let mut line = Vec::with_capacity(512);
    let mut skips = Skips::default();
    let mut stopped = None;
    let mut source = Some(first);
    'loops: for pass in 0..loops {
        let mut src = match source.take() {
            Some(s) => s,
            None => Source::open(&input.file, input.format, &input.opts)?,
        };
        loop {
            match src.next_line(&mut line) {
                Step::Line => {
                    if !sender.send(&line)? {
                        break 'loops;
                    }
                }
                Step::Skipped(skip) => {
                    let shown = skips.count(&name, &skip);
                    if let (0, Some(l)) = (pass, shown) {
                        progress.suspend(|| eprintln!("{l}"));
                    }
                    if input.on_error == OnError::Stop {
                        stopped = Some(skip.to_string());
                        break 'loops;
                    }
                }
                Step::End => break,
            }
        }
        sender.end_loop();
    }
    Ok((sender.finish()?, skips, stopped))
}

/// Every quote line of `path` decoded into one buffer, `\n`-separated
/// (`demo --file`, which loops over its ticks in memory). Skipped records
/// are counted, not sent.
///
/// # Errors
/// As [`Source::open`].
pub fn decode_all(path: &Path) -> Result<(Vec<u8>, Skips), Failure> {
    let mut src = Source::open(path, InputFormat::Auto, &DecodeOptions::default())?;
    let mut out = Vec::new();
    let mut line = Vec::with_capacity(512);
    let mut skips = Skips::default();
    let name = path.display().to_string();
    loop {
        match src.next_line(&mut line) {
            Step::Line => {
                out.extend_from_slice(&line);
                out.push(b'\n');
            }
            Step::Skipped(s) => {
                skips.count(&name, &s);
            }
            Step::End => return Ok((out, skips)),
        }
    }
}
