//! Histogram interval logs: the standard HdrHistogram log format (the one
//! the Java `HistogramLogWriter` writes and `HistogramLogProcessor` reads),
//! written by the engine's reporter thread and by the client-side tools.
//!
//! ```text
//! #[Histogram log format version 1.3]
//! #[StartTime: 1764517200.123 (seconds since epoch)]
//! #[BaseTime: 1764517200.123 (seconds since epoch)]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! Tag=engine_e2e,0.000,1.000,1487934.000,HISTFAAAA…   ← one line per stage per interval
//! ```
//!
//! - Values are nanoseconds (the `Interval_Max` column too: no divisor).
//! - Each line's tag names the stage (`feed_parse`, `engine_e2e`, …) or the
//!   tool's series (`e2e_normal`, `e2e_slow`).
//! - Interval start times are seconds since `BaseTime` (= `StartTime`, the
//!   wall time the writer was opened), so logs written by different
//!   processes line up on one time axis.
//! - Histograms are encoded with the V2 deflate serializer, as the Java
//!   implementation writes them; [`hdrhistogram::serialization::Deserializer`]
//!   reads it back.
//!
//! A writer has one owner (the thread that records or merges); it buffers
//! and flushes after each interval, so a crash loses at most one interval.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

/// Extension of interval log files; `tickfan report` reads every such file in a directory.
pub const EXTENSION: &str = "hlog";

/// The file the engine's reporter writes in `--log-dir`.
pub const ENGINE_LOG: &str = "engine.hlog";

/// An interval log being written. Single owner.
pub struct HistogramLog {
    path: PathBuf,
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
    start: SystemTime,
}

impl std::fmt::Debug for HistogramLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistogramLog")
            .field("path", &self.path)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

/// Writing an interval log failed.
#[derive(Debug, thiserror::Error)]
pub enum HistogramLogError {
    /// The file could not be created or written. Check that the directory
    /// exists (or can be created) and is writable, and that the disk has room.
    #[error("cannot write histogram log {path}: {source}")]
    Io {
        /// The log file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A histogram could not be encoded (cannot happen for the engine's
    /// bounded `u64` histograms; reported rather than unwrapped).
    #[error("cannot encode a histogram for {path}: {why}")]
    Encode {
        /// The log file.
        path: PathBuf,
        /// The serializer's message.
        why: String,
    },
    /// A tag contains a character the format forbids (`,`, space, newline).
    #[error("invalid histogram log tag '{0}'")]
    Tag(String),
}

impl HistogramLog {
    /// Creates (truncating) `dir/name`, creating `dir` if needed, and writes
    /// the header with `start` as both `StartTime` and `BaseTime`.
    ///
    /// # Errors
    /// [`HistogramLogError::Io`] when the directory or file cannot be created
    /// or written.
    pub fn create(
        dir: &Path,
        name: &str,
        start: SystemTime,
        comment: &str,
    ) -> Result<HistogramLog, HistogramLogError> {
        let path = dir.join(name);
        let io_err = |source| HistogramLogError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io_err)?;
        let file = File::create(&path).map_err(io_err)?;
        let mut log = HistogramLog {
            path: path.clone(),
            out: BufWriter::with_capacity(64 * 1024, file),
            serializer: V2DeflateSerializer::new(),
            start,
        };
        {
            let mut builder = IntervalLogWriterBuilder::new();
            builder
                .add_comment("[Histogram log format version 1.3]")
                .add_comment(comment)
                .add_comment("values in nanoseconds; tag = stage")
                .with_start_time(start)
                .with_base_time(start);
            builder
                .begin_log_with(&mut log.out, &mut log.serializer)
                .map_err(io_err)?;
        }
        log.out
            .write_all(
                b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
            )
            .and_then(|_| log.out.flush())
            .map_err(io_err)?;
        Ok(log)
    }

    /// Where this log is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The wall time intervals are counted from.
    pub fn start(&self) -> SystemTime {
        self.start
    }

    /// Appends one interval histogram (not flushed; see [`Self::flush`]).
    /// `since_start` is when the interval began, relative to the log's start.
    /// An empty histogram is skipped.
    ///
    /// # Errors
    /// An invalid tag, an encoding failure or an I/O error.
    pub fn append(
        &mut self,
        tag: &str,
        since_start: Duration,
        length: Duration,
        hist: &Histogram<u64>,
    ) -> Result<(), HistogramLogError> {
        if hist.is_empty() {
            return Ok(());
        }
        let t = Tag::new(tag)
            .filter(|_| !tag.contains([' ', '\n', '\r']))
            .ok_or_else(|| HistogramLogError::Tag(tag.to_string()))?;
        // A builder without comments or times writes no header lines, so a
        // fresh writer per interval only appends the interval line.
        let mut builder = IntervalLogWriterBuilder::new();
        let mut writer = builder
            .with_max_value_divisor(1.0)
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(|source| HistogramLogError::Io {
                path: self.path.clone(),
                source,
            })?;
        use hdrhistogram::serialization::interval_log::IntervalLogWriterError as W;
        writer
            .write_histogram(hist, since_start, length, Some(t))
            .map_err(|e| match e {
                W::IoError(source) => HistogramLogError::Io {
                    path: self.path.clone(),
                    source,
                },
                W::SerializeError(e) => HistogramLogError::Encode {
                    path: self.path.clone(),
                    why: format!("{e:?}"),
                },
            })
    }

    /// Hands buffered lines to the OS.
    ///
    /// # Errors
    /// The I/O error.
    pub fn flush(&mut self) -> Result<(), HistogramLogError> {
        self.out.flush().map_err(|source| HistogramLogError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn round_trips_through_the_standard_reader() {
        let dir = tempfile::tempdir().unwrap();
        let start = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let mut log = HistogramLog::create(dir.path(), "t.hlog", start, "test").unwrap();
        let mut h = crate::metrics::stage::new_histogram();
        h.record(1_500).unwrap();
        h.record(2_000_000).unwrap();
        log.append(
            "engine_e2e",
            Duration::from_millis(1_000),
            Duration::from_secs(1),
            &h,
        )
        .unwrap();
        log.append(
            "empty",
            Duration::ZERO,
            Duration::from_secs(1),
            &crate::metrics::stage::new_histogram(),
        )
        .unwrap();
        assert!(matches!(
            log.append("bad tag", Duration::ZERO, Duration::from_secs(1), &h),
            Err(HistogramLogError::Tag(_))
        ));
        log.flush().unwrap();
        let bytes = std::fs::read(dir.path().join("t.hlog")).unwrap();
        let entries: Vec<_> = IntervalLogIterator::new(&bytes)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(entries.len(), 3, "StartTime, BaseTime, one interval");
        assert_eq!(
            entries[0],
            LogEntry::StartTime(Duration::from_millis(1_700_000_000_123))
        );
        let LogEntry::Interval(i) = &entries[2] else {
            panic!("{:?}", entries[2])
        };
        assert_eq!(i.tag().unwrap().as_str(), "engine_e2e");
        assert_eq!(i.start_timestamp(), Duration::from_secs(1));
        use base64::Engine as _;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(i.encoded_histogram())
            .unwrap();
        let back: Histogram<u64> = Deserializer::new()
            .deserialize(&mut raw.as_slice())
            .unwrap();
        assert_eq!(back.len(), 2);
        assert!(back.equivalent(2_000_000, back.max()));
    }
}
