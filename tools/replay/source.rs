//! Opening a replay file: what it is (by its content), and the one reader
//! stack every format reads through.
//!
//! ```text
//!  file ─▶ BufReader ─▶ zstd / gzip / as is ─▶ Guard ─▶ [first 4 KiB] ++ rest ─▶ csv | dbn | tardis
//!                        (by magic bytes)       (counts bytes,           (by content, or --format)
//!                                                keeps the decoder's error)
//! ```
//!
//! - **Compression** is told by its magic bytes (`28 B5 2F FD` zstd,
//!   `1F 8B` gzip), whatever the file is called.
//! - **Format** is told by the first decompressed bytes: `DBN` and a
//!   version byte is Databento's DBN; a first line holding Tardis's quote
//!   columns (`exchange,symbol,timestamp,local_timestamp,ask_amount,
//!   ask_price,bid_price,bid_amount`) is Tardis CSV; anything else is
//!   tickfan's own CSV, sent line for line as before. `--format` overrides
//!   the guess (and then the content must fit it).
//! - **Streaming**: nothing reads the whole file. The readers hold a
//!   256 KiB buffer, the decoder's window and one record; a quote is written
//!   into the caller's reused line buffer.
//! - **[`Guard`]** sits right after the decompressor. The DBN decoder takes
//!   an `UnexpectedEof` from its reader for a clean end, and zstd and gzip
//!   report a stream cut short exactly so; the guard keeps the error for the
//!   format reader (which reports `truncated`) and hands the decoder an
//!   error it does not swallow.

use std::io::{self, BufReader, Chain, Cursor, Read};
use std::path::Path;

use tickfan::error::Failure;

use super::csv::CsvSource;
use super::dbn::DbnSource;
use super::skips::{Reason, Skip};
use super::symbol_map::SymbolMap;
use super::tardis::TardisSource;

/// `--format`: the replay file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputFormat {
    /// Tell it from the content (see the module docs).
    #[default]
    Auto,
    /// tickfan's CSV (`ts_ns,symbol,bid,ask,bid_qty,ask_qty`), sent as is.
    Csv,
    /// Databento DBN, versions 1–3.
    Dbn,
    /// Tardis.dev CSV, `quotes` or `book_ticker`.
    Tardis,
}

impl InputFormat {
    /// The names `--format` takes.
    pub const NAMES: &'static str = "auto, csv, dbn, tardis";

    /// A clap value parser: the names above, and for the values `replay`
    /// used to take here (what it sends) a pointer to `--send-as`.
    ///
    /// # Errors
    /// An unknown name, in one line.
    pub fn parse(s: &str) -> Result<InputFormat, String> {
        match s {
            "auto" => Ok(InputFormat::Auto),
            "csv" => Ok(InputFormat::Csv),
            "dbn" => Ok(InputFormat::Dbn),
            "tardis" => Ok(InputFormat::Tardis),
            "redis-publish" | "pmessage" => Err(format!(
                "--format names the file's format ({}); what replay sends is --send-as {s}",
                Self::NAMES
            )),
            _ => Err(format!("expected one of {}", Self::NAMES)),
        }
    }
}

/// `--ts`: which of a vendor record's timestamps becomes the quote's
/// `ts_ns` (and so paces `--speed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TsField {
    /// When the venue stamped it: DBN `ts_event`, Tardis `timestamp`.
    Event,
    /// When it was captured: DBN `ts_recv`, Tardis `local_timestamp`. The
    /// default: both vendors sort their files by it.
    #[default]
    Recv,
}

impl TsField {
    /// A clap value parser: `event` or `recv`, or a vendor's column name
    /// (`ts_event`, `ts_recv`, `timestamp`, `local_timestamp`).
    ///
    /// # Errors
    /// Another word.
    pub fn parse(s: &str) -> Result<TsField, String> {
        match s {
            "event" | "ts_event" | "timestamp" => Ok(TsField::Event),
            "recv" | "ts_recv" | "local_timestamp" => Ok(TsField::Recv),
            _ => Err(
                "expected event (ts_event, Tardis timestamp) or recv (ts_recv, Tardis local_timestamp)"
                    .into(),
            ),
        }
    }
}

/// How vendor records become quotes.
#[derive(Debug, Clone, Default)]
pub struct DecodeOptions {
    /// Which timestamp becomes `ts_ns`.
    pub ts: TsField,
    /// Renames applied to the file's own symbols.
    pub symbols: SymbolMap,
}

/// The stream as it leaves the decompressor, counted.
pub type Stream = Chain<Cursor<Vec<u8>>, Guard>;

/// A decompressed reader that counts what it yields and keeps the first
/// error of the reader below it (see the module docs).
pub struct Guard {
    inner: Box<dyn Read + Send>,
    /// Decompressed bytes read so far.
    bytes: u64,
    /// The first error from `inner`, as `(reason, words)`.
    failed: Option<(Reason, String)>,
    /// What decompressed it, for the error's words.
    codec: &'static str,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("bytes", &self.bytes)
            .field("failed", &self.failed)
            .field("codec", &self.codec)
            .finish_non_exhaustive()
    }
}

impl Guard {
    /// Decompressed bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// What decompressed the stream (`zstd`, `gzip`; empty: nothing).
    pub fn codec(&self) -> &'static str {
        self.codec
    }

    /// The reader's first error, as a skip at `number`.
    pub fn failure(&self, unit: super::skips::Unit, number: u64) -> Option<Skip> {
        self.failed.as_ref().map(|(reason, detail)| Skip {
            unit,
            number,
            reason: *reason,
            detail: detail.clone(),
        })
    }
}

impl Read for Guard {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.failed.is_some() {
            return Err(io::Error::other("replay input failed before"));
        }
        loop {
            match self.inner.read(buf) {
                Ok(n) => {
                    self.bytes += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let reason = if e.kind() == io::ErrorKind::UnexpectedEof {
                        Reason::Truncated
                    } else {
                        Reason::Corrupt
                    };
                    let words = if self.codec.is_empty() {
                        format!("read failed: {e}")
                    } else {
                        format!("{} stream: {e}", self.codec)
                    };
                    self.failed = Some((reason, words));
                    // Not `UnexpectedEof`: the DBN decoder would take it
                    // for the end of the file.
                    return Err(io::Error::other("replay input failed"));
                }
            }
        }
    }
}

/// Bytes read ahead to tell the format.
const SNIFF_LEN: usize = 4096;

/// Read-buffer size of the file and of the text readers.
pub const READ_BUF: usize = 256 * 1024;

/// What the first bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    /// tickfan CSV (also: anything unrecognised).
    Csv,
    /// DBN with this version byte.
    Dbn(u8),
    /// Tardis quotes / book_ticker CSV.
    Tardis,
    /// A Tardis CSV of another data type (trades, book snapshots…).
    TardisOther,
}

/// Tells the format from the first decompressed bytes.
pub fn detect(head: &[u8]) -> Detected {
    if head.len() >= 4 && &head[..3] == b"DBN" {
        return Detected::Dbn(head[3]);
    }
    let first = match memchr::memchr(b'\n', head) {
        Some(i) => &head[..i],
        None => head,
    };
    match super::tardis::Columns::from_header(first) {
        Ok(_) => Detected::Tardis,
        Err(super::tardis::NotQuotes::OtherTardis) => Detected::TardisOther,
        Err(super::tardis::NotQuotes::NotTardis) => Detected::Csv,
    }
}

/// A replay file being read: one quote line at a time.
#[derive(Debug)]
pub enum Source {
    /// tickfan CSV, line for line.
    Csv(CsvSource),
    /// DBN records mapped to quotes.
    Dbn(Box<DbnSource>),
    /// Tardis rows mapped to quotes.
    Tardis(Box<TardisSource>),
}

/// One step of a [`Source`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The caller's line buffer holds the next line (no newline).
    Line,
    /// A record was skipped (after a `truncated` or `corrupt` one, `End`
    /// follows).
    Skipped(Skip),
    /// The file is over.
    End,
}

impl Source {
    /// Opens `path` (see the module docs). `name` is how messages name it.
    ///
    /// # Errors
    /// The file cannot be opened or read (usage: exit 2, as a missing file
    /// always was); the content does not fit `format`; a DBN file of a
    /// version other than 1–3 or of a schema that holds no quotes; a DBN
    /// header that cannot be decoded.
    pub fn open(path: &Path, format: InputFormat, opts: &DecodeOptions) -> Result<Source, Failure> {
        let file = std::fs::File::open(path)
            .map_err(|e| Failure::Usage(format!("cannot open {}: {e}", path.display())))?;
        Self::from_reader(&path.display().to_string(), Box::new(file), format, opts)
    }

    /// Reads a replay stream from `reader` (a file, a pipe, bytes in
    /// memory). As [`Source::open`].
    ///
    /// # Errors
    /// As [`Source::open`].
    pub fn from_reader(
        name: &str,
        reader: Box<dyn Read + Send>,
        format: InputFormat,
        opts: &DecodeOptions,
    ) -> Result<Source, Failure> {
        let read_err = |e: io::Error| Failure::Usage(format!("cannot read {name}: {e}"));
        // The magic bytes, read whole even from a pipe that yields them
        // one at a time, then put back in front of the rest.
        let mut reader = reader;
        let mut magic = [0u8; 4];
        let mut got = 0;
        while got < magic.len() {
            match reader.read(&mut magic[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(read_err(e)),
            }
        }
        let magic = &magic[..got];
        let raw = BufReader::with_capacity(READ_BUF, Cursor::new(magic.to_vec()).chain(reader));
        let (inner, codec): (Box<dyn Read + Send>, &'static str) = if magic.starts_with(&ZSTD_MAGIC)
        {
            let d = zstd::stream::read::Decoder::with_buffer(raw).map_err(read_err)?;
            (Box::new(d), "zstd")
        } else if magic.starts_with(&GZIP_MAGIC) {
            (Box::new(flate2::bufread::MultiGzDecoder::new(raw)), "gzip")
        } else {
            (Box::new(raw), "")
        };
        let mut guard = Guard {
            inner,
            bytes: 0,
            failed: None,
            codec,
        };
        let mut head = vec![0u8; SNIFF_LEN];
        let mut n = 0;
        while n < head.len() {
            match guard.read(&mut head[n..]) {
                Ok(0) | Err(_) => break, // an error stays in the guard
                Ok(k) => n += k,
            }
        }
        head.truncate(n);
        let detected = detect(&head);
        let stream: Stream = Cursor::new(head).chain(guard);
        let kind = match (format, detected) {
            (InputFormat::Auto | InputFormat::Tardis, Detected::TardisOther) => {
                return Err(Failure::Usage(format!(
                    "{name}: a Tardis CSV of another data type (its columns are not {}); replay takes the quotes and book_ticker data types",
                    super::tardis::HEADER
                )))
            }
            (InputFormat::Auto, d) => d,
            (InputFormat::Csv, _) => Detected::Csv,
            (InputFormat::Dbn, d @ Detected::Dbn(_)) => d,
            (InputFormat::Dbn, _) => {
                return Err(Failure::Usage(format!(
                    "{name}: --format dbn, but the file does not start with DBN's `DBN` and a version byte{}",
                    if codec.is_empty() { String::new() } else { format!(" (after {codec} decompression)") }
                )))
            }
            (InputFormat::Tardis, Detected::Tardis) => Detected::Tardis,
            (InputFormat::Tardis, _) => {
                return Err(Failure::Usage(format!(
                    "{name}: --format tardis, but the first line is not a Tardis quotes/book_ticker header ({})",
                    super::tardis::HEADER
                )))
            }
        };
        Ok(match kind {
            Detected::Csv => Source::Csv(CsvSource::new(stream)),
            Detected::Dbn(version) => {
                Source::Dbn(Box::new(DbnSource::new(name, stream, version, opts)?))
            }
            Detected::Tardis => Source::Tardis(Box::new(TardisSource::new(name, stream, opts)?)),
            Detected::TardisOther => unreachable!("refused above"),
        })
    }

    /// What it was opened as: `csv`, `dbn vN (schema)`, `tardis`.
    pub fn describe(&self) -> String {
        match self {
            Source::Csv(_) => "tickfan csv".into(),
            Source::Dbn(d) => d.describe(),
            Source::Tardis(_) => "tardis csv".into(),
        }
    }

    /// The vendor's name of the timestamp `ts` selects in this file.
    pub fn ts_name(&self, ts: TsField) -> &'static str {
        match (self, ts) {
            (Source::Dbn(_), TsField::Event) => "ts_event",
            (Source::Dbn(_), TsField::Recv) => "ts_recv",
            (Source::Tardis(_), TsField::Event) => "timestamp",
            (Source::Tardis(_), TsField::Recv) => "local_timestamp",
            (Source::Csv(_), _) => "ts_ns",
        }
    }

    /// Whether the lines are tickfan CSV passed through as is.
    pub fn is_csv(&self) -> bool {
        matches!(self, Source::Csv(_))
    }

    /// Writes the next line into `line` (cleared first). No allocation in
    /// steady state: `line` and the readers' buffers are reused.
    pub fn next_line(&mut self, line: &mut Vec<u8>) -> Step {
        line.clear();
        match self {
            Source::Csv(s) => s.next_line(line),
            Source::Dbn(s) => s.next_line(line),
            Source::Tardis(s) => s.next_line(line),
        }
    }
}

/// A zstd frame's first four bytes (RFC 8878, section 3.1.1).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// A gzip member's first two bytes (RFC 1952, section 2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1F, 0x8B];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_tell_the_format() {
        assert_eq!(detect(b"DBN\x02\x59\x01"), Detected::Dbn(2));
        assert_eq!(
            detect(b"exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount\nx"),
            Detected::Tardis
        );
        assert_eq!(
            detect(b"ts_ns,symbol,bid,ask,bid_qty,ask_qty\n1,A,1,2,3,4\n"),
            Detected::Csv
        );
        assert_eq!(detect(b"1,A,1,2,3,4"), Detected::Csv);
        // A Tardis trades file is Tardis, but not quotes: refused at open.
        assert_eq!(
            detect(b"exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"),
            Detected::TardisOther
        );
        assert_eq!(detect(b""), Detected::Csv);
    }

    #[test]
    fn format_names_and_the_old_send_values_point_to_send_as() {
        assert_eq!(InputFormat::parse("dbn"), Ok(InputFormat::Dbn));
        let e = InputFormat::parse("pmessage").unwrap_err();
        assert!(e.contains("--send-as pmessage"), "{e}");
        assert_eq!(TsField::parse("local_timestamp"), Ok(TsField::Recv));
        assert_eq!(TsField::parse("ts_event"), Ok(TsField::Event));
        assert!(TsField::parse("now").is_err());
    }
}
