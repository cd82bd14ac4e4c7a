//! Segment files: their header, the record frame, and the scan that reads
//! them back and stops at a torn tail.
//!
//! ```text
//!  segment file:  header (20 bytes) | frame | frame | …
//!  header:        magic "TFJOURNL" (8) | version u32 LE | segment number u64 LE
//!  frame:         payload length u32 LE | crc32 of payload u32 LE | payload
//! ```
//!
//! A crash can leave the last frame of the segment being written incomplete
//! or half-old (a torn write): its length runs past the end, or its checksum
//! does not match, or its payload does not decode. The scan stops there and
//! reports the length of the valid prefix; only a segment's *tail* can be
//! torn, since nothing is appended after a frame until it is whole.
//!
//! A segment's file may be longer than its frames: space reserved ahead of
//! the writes ([`super::files`]) reads as zeros. A frame header of zeros
//! (length 0, checksum 0) is therefore the segment's clean end, not a tear:
//! no record encodes to an empty payload.

use crate::order::msg::record::{DecodeError, Record};

/// First bytes of every segment.
pub const MAGIC: [u8; 8] = *b"TFJOURNL";
/// Format version written and accepted.
pub const VERSION: u32 = 1;
/// Header length, bytes.
pub const HEADER_LEN: usize = 20;
/// Frame header (length, checksum), bytes.
pub const FRAME_HEADER: usize = 8;
/// Longest payload accepted on read: a longer length field is garbage.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// A segment's file name: `segment-<number, 12 digits>.tfj`, so names sort
/// in segment order.
pub fn file_name(segment: u64) -> String {
    format!("segment-{segment:012}.tfj")
}

/// The segment number of a file name made by [`file_name`].
pub fn parse_file_name(name: &str) -> Option<u64> {
    name.strip_prefix("segment-")?
        .strip_suffix(".tfj")?
        .parse()
        .ok()
}

/// The header of segment `segment`.
pub fn header(segment: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..].copy_from_slice(&segment.to_le_bytes());
    h
}

/// Appends `rec` as one frame to `out`.
pub fn put_frame(out: &mut Vec<u8>, rec: &Record) {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER]);
    rec.encode(out);
    let payload = &out[start + FRAME_HEADER..];
    let len = payload.len() as u32;
    let crc = crc32fast::hash(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// A segment whose header is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Shorter than a header.
    #[error("shorter than its header")]
    Short,
    /// Not a journal segment.
    #[error("bad magic (not a tickfan journal segment)")]
    Magic,
    /// Written by another format version.
    #[error("format version {0}, expected {VERSION}")]
    Version(u32),
    /// The number in the header is not the one in the file name.
    #[error("header says segment {found}, file name says {expected}")]
    Number {
        /// In the file name.
        expected: u64,
        /// In the header.
        found: u64,
    },
}

/// Why a scan stopped before the end of the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Torn {
    /// The frame header or payload runs past the end.
    Incomplete,
    /// The length field is larger than any payload written.
    Length(u32),
    /// The checksum does not match.
    Checksum,
    /// The checksum matches but the payload does not decode.
    Payload(DecodeError),
}

/// What a scan found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Bytes of the valid prefix (header and whole frames).
    pub valid_len: usize,
    /// Why it stopped at a tear, if it did. `None` with `valid_len` short
    /// of the bytes' length: reserved space (zeros) follows the frames.
    pub torn: Option<Torn>,
}

/// Reads segment `segment` from `bytes`, calling `visit` for each whole,
/// checked record in order, and stops at the first frame that is not whole.
///
/// # Errors
/// A header that is not a journal segment header for `segment`.
pub fn scan(
    bytes: &[u8],
    segment: u64,
    mut visit: impl FnMut(Record),
) -> Result<Scan, HeaderError> {
    if bytes.len() < HEADER_LEN {
        return Err(HeaderError::Short);
    }
    if bytes[..8] != MAGIC {
        return Err(HeaderError::Magic);
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(HeaderError::Version(version));
    }
    let found = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    if found != segment {
        return Err(HeaderError::Number {
            expected: segment,
            found,
        });
    }
    let mut at = HEADER_LEN;
    let torn = loop {
        let rest = &bytes[at..];
        if rest.is_empty() {
            break None;
        }
        if rest.len() < FRAME_HEADER {
            break Some(Torn::Incomplete);
        }
        let len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if len == 0 && crc == 0 {
            break None; // reserved space: the end of what was written
        }
        if len as usize > MAX_PAYLOAD {
            break Some(Torn::Length(len));
        }
        let Some(payload) = rest[FRAME_HEADER..].get(..len as usize) else {
            break Some(Torn::Incomplete);
        };
        if crc32fast::hash(payload) != crc {
            break Some(Torn::Checksum);
        }
        match Record::decode(payload) {
            Ok(rec) => visit(rec),
            Err(e) => break Some(Torn::Payload(e)),
        }
        at += FRAME_HEADER + len as usize;
    };
    Ok(Scan {
        valid_len: at,
        torn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::msg::record::tests::samples;

    fn segment_of(records: &[Record]) -> (Vec<u8>, Vec<usize>) {
        let mut buf = header(3).to_vec();
        let mut ends = Vec::new();
        for r in records {
            put_frame(&mut buf, r);
            ends.push(buf.len());
        }
        (buf, ends)
    }

    #[test]
    fn torn_last_record_at_every_byte_offset_recovers_the_others() {
        let records: Vec<Record> = samples().into_iter().cycle().take(12).collect();
        let (buf, ends) = segment_of(&records);
        let n = records.len();
        let last_start = ends[n - 2];
        for cut in last_start..=buf.len() {
            let mut got = Vec::new();
            let s = scan(&buf[..cut], 3, |r| got.push(r)).unwrap();
            if cut == buf.len() {
                assert_eq!(got, records, "whole file");
                assert_eq!(s.torn, None);
            } else {
                assert_eq!(got, records[..n - 1], "cut at {cut}");
                assert_eq!(s.valid_len, last_start, "cut at {cut}");
                assert_eq!(s.torn.is_some(), cut > last_start, "cut at {cut}");
            }
        }
    }

    #[test]
    fn in_reserved_space_zeros_end_the_segment_and_a_torn_last_record_is_still_torn() {
        let records: Vec<Record> = samples().into_iter().cycle().take(12).collect();
        let (buf, ends) = segment_of(&records);
        let n = records.len();
        let last_start = ends[n - 2];
        for cut in last_start..=buf.len() {
            // What a crash leaves in a reserved segment: the bytes written
            // so far, then the zeros of the space not reached.
            let mut file = buf[..cut].to_vec();
            file.resize(buf.len() + 4096, 0);
            let mut got = Vec::new();
            let s = scan(&file, 3, |r| got.push(r)).unwrap();
            // A cut that loses only zero bytes leaves the very same bytes.
            if buf[cut..].iter().all(|&b| b == 0) {
                assert_eq!(got, records, "whole at {cut}");
                assert_eq!((s.valid_len, s.torn), (buf.len(), None));
            } else {
                assert_eq!(got, records[..n - 1], "cut at {cut}");
                assert_eq!(s.valid_len, last_start, "cut at {cut}");
                assert_eq!(s.torn.is_some(), cut > last_start, "cut at {cut}");
            }
        }
    }

    #[test]
    fn a_flipped_byte_in_the_last_record_is_a_checksum_tear() {
        let records = samples();
        let (buf, ends) = segment_of(&records);
        let last_start = ends[ends.len() - 2];
        for at in last_start + FRAME_HEADER..buf.len() {
            let mut b = buf.clone();
            b[at] ^= 0x40;
            let mut got = 0;
            let s = scan(&b, 3, |_| got += 1).unwrap();
            assert_eq!(got, records.len() - 1, "flip at {at}");
            assert_eq!(s.torn, Some(Torn::Checksum), "flip at {at}");
        }
    }

    #[test]
    fn foreign_headers_are_refused() {
        assert_eq!(scan(b"TFJ", 0, |_| {}), Err(HeaderError::Short));
        let mut h = header(5);
        assert_eq!(
            scan(&h, 6, |_| {}),
            Err(HeaderError::Number {
                expected: 6,
                found: 5
            })
        );
        h[8] = 9;
        assert_eq!(scan(&h, 5, |_| {}), Err(HeaderError::Version(9)));
        h[0] = b'X';
        assert_eq!(scan(&h, 5, |_| {}), Err(HeaderError::Magic));
    }

    #[test]
    fn file_names_sort_and_parse() {
        assert_eq!(parse_file_name(&file_name(42)), Some(42));
        assert!(file_name(9) < file_name(10));
        assert_eq!(parse_file_name("segment-x.tfj"), None);
    }
}
