//! Reading the journal back at start: every segment in the data directory,
//! in order, each record handed to a visitor; a torn tail of the last
//! segment is cut off (it was never acknowledged: its sync never returned).
//! A last segment whose header was never made durable (created just before
//! a crash, or as the disk filled) is removed: a segment's header is synced
//! before any record is written into it, so nothing in it was acknowledged.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use super::segment::{header, parse_file_name, scan, HeaderError, Torn, HEADER_LEN};
use crate::order::msg::record::Record;

/// The journal cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// The directory or a segment cannot be read, or a torn tail cut.
    #[error("journal {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A segment's header is not ours.
    #[error("journal segment {path}: {source}")]
    Header {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: HeaderError,
    },
    /// A segment other than the last is damaged: not a torn write but lost
    /// or corrupted data; the operator decides (restore or move it away).
    #[error(
        "journal segment {path} is damaged at byte {offset} ({why:?}) and is not the last one"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// Where the valid prefix ends.
        offset: usize,
        /// What was found there.
        why: Torn,
    },
}

/// What recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Segments on disk (number, bytes after any cut), oldest first.
    pub segments: Vec<(u64, u64)>,
    /// Records read.
    pub records: u64,
    /// Bytes of a torn tail cut from the last segment.
    pub torn_bytes: u64,
}

impl Recovered {
    /// The number the next segment gets.
    pub fn next_segment(&self) -> u64 {
        self.segments.last().map_or(1, |s| s.0 + 1)
    }
}

/// True when `bytes` (segment `n`) do not start with its whole header but
/// with a part of it, or nothing, and hold only zeros after that: a file
/// created (and perhaps reserved) whose header write never reached the
/// disk. A header of another segment or file, or a damaged header with
/// data after it, stays an error (the operator decides).
fn header_never_written(bytes: &[u8], n: u64) -> bool {
    let h = header(n);
    let k = bytes.len().min(HEADER_LEN);
    if bytes[..k] == h[..k] && k == HEADER_LEN {
        return false;
    }
    let same = bytes[..k]
        .iter()
        .zip(h)
        .take_while(|(a, b)| **a == *b)
        .count();
    bytes[same..].iter().all(|&b| b == 0)
}

/// Reads every segment in `dir` (created when missing), oldest first,
/// calling `visit` with each record, and cuts a torn tail off the last one.
///
/// # Errors
/// An unreadable directory or segment, a foreign header, or damage before
/// the last segment's tail.
pub fn recover(dir: &Path, mut visit: impl FnMut(Record)) -> Result<Recovered, RecoverError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RecoverError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut numbers = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        if let Some(n) = entry.file_name().to_str().and_then(parse_file_name) {
            numbers.push(n);
        }
    }
    numbers.sort_unstable();
    let mut out = Recovered::default();
    for (i, &n) in numbers.iter().enumerate() {
        let path = dir.join(super::segment::file_name(n));
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        if i + 1 == numbers.len() && header_never_written(&bytes, n) {
            log::warn!(
                "journal: removed {} ({} bytes): its header was never written (made just before a crash or as the disk filled); nothing in it was acknowledged",
                path.display(),
                bytes.len()
            );
            std::fs::remove_file(&path).map_err(io(&path))?;
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io(dir))?;
            continue;
        }
        let s = scan(&bytes, n, |r| {
            out.records += 1;
            visit(r);
        })
        .map_err(|source| RecoverError::Header {
            path: path.clone(),
            source,
        })?;
        if let Some(why) = &s.torn {
            if i + 1 != numbers.len() {
                return Err(RecoverError::Damaged {
                    path,
                    offset: s.valid_len,
                    why: why.clone(),
                });
            }
            log::warn!(
                "journal: cut a torn tail of {} bytes from {} ({why:?})",
                bytes.len() - s.valid_len,
                path.display()
            );
            out.torn_bytes = (bytes.len() - s.valid_len) as u64;
        }
        if bytes.len() > s.valid_len {
            // A torn tail, or space reserved ahead of writes that will not
            // come (the journal starts a new segment after recovery): the
            // file keeps only its frames, so the disk holds what is counted.
            let f = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io(&path))?;
            f.set_len(s.valid_len as u64).map_err(io(&path))?;
            f.sync_all().map_err(io(&path))?;
        }
        out.segments.push((n, s.valid_len as u64));
    }
    Ok(out)
}
