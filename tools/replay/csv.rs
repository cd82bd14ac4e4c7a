//! tickfan's own CSV (`ts_ns,symbol,bid,ask,bid_qty,ask_qty`), plain or
//! compressed: every line is passed on exactly as it is in the file (a
//! header, a comment, a malformed line too: the engine skips or
//! dead-letters them, as it would from any feed). Only the stream itself
//! can fail here: a compressed file cut short ends with one `truncated`
//! skip, and its partial last line is not sent.

use std::io::{BufRead, BufReader};

use super::skips::{Skip, Unit};
use super::source::{Step, Stream, READ_BUF};

/// Lines of a tickfan CSV stream.
#[derive(Debug)]
pub struct CsvSource {
    reader: BufReader<Stream>,
    /// Lines read so far (the number of the current line).
    line_no: u64,
    done: bool,
}

impl CsvSource {
    /// Reads lines of `stream`.
    pub fn new(stream: Stream) -> CsvSource {
        CsvSource {
            reader: BufReader::with_capacity(READ_BUF, stream),
            line_no: 0,
            done: false,
        }
    }

    /// Whether the file was compressed.
    pub fn compressed(&self) -> bool {
        !self.reader.get_ref().get_ref().1.codec().is_empty()
    }

    /// The next line, without its `\n` (a `\r` before it stays, as sent
    /// before issue 28).
    pub fn next_line(&mut self, line: &mut Vec<u8>) -> Step {
        if self.done {
            return Step::End;
        }
        self.line_no += 1;
        match self.reader.read_until(b'\n', line) {
            Ok(0) => {
                self.done = true;
                Step::End
            }
            Ok(_) => {
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                Step::Line
            }
            Err(e) => {
                self.done = true;
                line.clear();
                let guard = &self.reader.get_ref().get_ref().1;
                Step::Skipped(guard.failure(Unit::Line, self.line_no).unwrap_or(Skip {
                    unit: Unit::Line,
                    number: self.line_no,
                    reason: super::skips::Reason::Corrupt,
                    detail: e.to_string(),
                }))
            }
        }
    }
}
