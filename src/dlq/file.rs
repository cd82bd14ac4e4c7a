//! The dead-letter file on disk: JSON lines appended, synced per batch,
//! rotated by size, read back as a stream.
//!
//! Single writer: the DLQ thread. Layout, for `--dlq-file dlq.jsonl`:
//!
//! ```text
//! dlq.jsonl   the live file (appended to)
//! dlq.1       the previous one, rotated when the live file would pass
//! dlq.2         --dlq-max-bytes; at most ROTATIONS kept, the oldest
//! dlq.3         dropped at the next rotation
//! ```
//!
//! Invariants: a record handed to [`DlqFile::write`] is on disk after the
//! next [`DlqFile::sync`] (`fdatasync`); the file and its directory are
//! created on the first record (an engine that never dead-letters leaves
//! nothing behind); a line cut by a crash is ended with a newline before
//! anything is appended after it, so it costs only itself. Reading at start
//! ([`for_each_record`]) goes line by line through a `BufReader`, oldest
//! rotation first: memory holds one line at a time, never the file.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::DeadLetter;

/// Rotated files kept (`dlq.1` … `dlq.ROTATIONS`).
pub(crate) const ROTATIONS: u32 = 3;

/// The path of rotation `n` of `path` (`dlq.jsonl` → `dlq.1`).
pub(crate) fn rotation(path: &Path, n: u32) -> PathBuf {
    path.with_extension(n.to_string())
}

/// The live dead-letter file.
#[derive(Debug)]
pub(crate) struct DlqFile {
    path: PathBuf,
    max_bytes: u64,
    out: Option<BufWriter<File>>,
    /// Bytes in the live file.
    size: u64,
    /// A second handle on the live file, for the on-fatal hook's sync
    /// (replaced at each rotation).
    for_fatal: Arc<Mutex<Option<File>>>,
}

impl DlqFile {
    /// The file at `path`, rotated past `max_bytes`. Opens it now if it
    /// exists (so an unreadable file fails the start); otherwise it is
    /// created, with its directory, on the first record.
    ///
    /// # Errors
    /// When an existing file cannot be opened for appending.
    pub(crate) fn open(path: PathBuf, max_bytes: u64) -> std::io::Result<DlqFile> {
        let mut f = DlqFile {
            path,
            max_bytes,
            out: None,
            size: 0,
            for_fatal: Arc::default(),
        };
        if f.path.exists() {
            f.open_live()?;
        }
        Ok(f)
    }

    /// The handle the on-fatal hook syncs.
    pub(crate) fn for_fatal(&self) -> Arc<Mutex<Option<File>>> {
        Arc::clone(&self.for_fatal)
    }

    fn open_live(&mut self) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let created = !self.path.exists();
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&self.path)?;
        self.size = file.metadata()?.len();
        if self.size > 0 {
            // A crash can leave a cut last line: end it, so the next record
            // starts a line of its own.
            let mut last = [0u8; 1];
            file.seek(SeekFrom::End(-1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
                self.size += 1;
            }
        }
        if created {
            sync_dir(&self.path);
        }
        *self.for_fatal.lock() = Some(file.try_clone()?);
        self.out = Some(BufWriter::new(file));
        Ok(())
    }

    /// Appends one record as a line (rotating first if the line would take
    /// the live file past its bound). Durable after the next [`sync`](Self::sync).
    ///
    /// # Errors
    /// When the file cannot be created, rotated or written.
    pub(crate) fn write(&mut self, rec: &DeadLetter) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(rec).expect("dead letter serialises");
        line.push(b'\n');
        if self.out.is_none() {
            self.open_live()?;
        }
        if self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        let out = self.out.as_mut().expect("opened above");
        out.write_all(&line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    /// Flushes and `fdatasync`s what was written.
    ///
    /// # Errors
    /// When the flush or the sync fails.
    pub(crate) fn sync(&mut self) -> std::io::Result<()> {
        match self.out.as_mut() {
            Some(out) => {
                out.flush()?;
                out.get_ref().sync_data()
            }
            None => Ok(()),
        }
    }

    /// Renames the live file to `.1` (shifting the older ones, dropping
    /// the oldest) and starts a new one.
    fn rotate(&mut self) -> std::io::Result<()> {
        self.sync()?;
        self.out = None;
        for n in (1..ROTATIONS).rev() {
            let from = rotation(&self.path, n);
            if from.exists() {
                std::fs::rename(&from, rotation(&self.path, n + 1))?;
            }
        }
        std::fs::rename(&self.path, rotation(&self.path, 1))?;
        log::info!(
            "dead-letter file {} rotated past {} bytes",
            self.path.display(),
            self.max_bytes
        );
        self.open_live()
    }
}

/// Syncs `path`'s directory, so a new or renamed file survives a crash
/// (best effort: a directory that cannot be opened is not an error).
fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Calls `f` with every readable record of the file at `path` and its
/// rotations, oldest first, one line in memory at a time; returns how many
/// lines did not parse (a line cut by a crash).
///
/// # Errors
/// When a file that exists cannot be read.
pub(crate) fn for_each_record(
    path: &Path,
    mut f: impl FnMut(DeadLetter),
) -> std::io::Result<usize> {
    let mut bad = 0usize;
    let files = (1..=ROTATIONS)
        .rev()
        .map(|n| rotation(path, n))
        .chain(std::iter::once(path.to_path_buf()));
    // Bytes, not a String: a line cut inside a UTF-8 sequence must count
    // as one bad line, not stop the read.
    let mut line = Vec::new();
    for p in files {
        let file = match File::open(&p) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut r = BufReader::new(file);
        loop {
            line.clear();
            if r.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            if line.trim_ascii().is_empty() {
                continue;
            }
            match serde_json::from_slice(&line) {
                Ok(rec) => f(rec),
                Err(_) => bad += 1,
            }
        }
    }
    Ok(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: usize) -> DeadLetter {
        let mut r = DeadLetter::refused("order", "p", "bridge_rejected", b"NEW x", 5, 1);
        r.order_id = Some(format!("o{i}"));
        r
    }

    fn ids(path: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for_each_record(path, |r| out.push(r.order_id.unwrap())).unwrap();
        out
    }

    #[test]
    fn created_with_its_directory_on_the_first_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data").join("dlq.jsonl");
        let mut f = DlqFile::open(path.clone(), 1 << 20).unwrap();
        f.sync().unwrap();
        assert!(!dir.path().join("data").exists());
        f.write(&rec(1)).unwrap();
        f.sync().unwrap();
        assert_eq!(ids(&path), ["o1"]);
    }

    #[test]
    fn rotated_by_size_keeping_rotations_bounded_and_read_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dlq.jsonl");
        let line = serde_json::to_vec(&rec(10)).unwrap().len() as u64 + 1;
        // Two records per file.
        let mut f = DlqFile::open(path.clone(), 2 * line).unwrap();
        for i in 10..30 {
            f.write(&rec(i)).unwrap();
        }
        f.sync().unwrap();
        for p in [path.clone(), rotation(&path, 1), rotation(&path, 3)] {
            let len = std::fs::metadata(&p).unwrap().len();
            assert!(len <= 2 * line, "{} holds {len} bytes", p.display());
        }
        assert_eq!(rotation(&path, 1), dir.path().join("dlq.1"));
        assert!(!rotation(&path, ROTATIONS + 1).exists(), "bounded");
        // The newest (ROTATIONS + 1) × 2 records survive, in order.
        let want: Vec<String> = (22..30).map(|i| format!("o{i}")).collect();
        assert_eq!(ids(&path), want);
    }

    #[test]
    fn a_line_cut_by_a_crash_costs_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("dlq.jsonl");
        let mut whole = serde_json::to_vec(&rec(1)).unwrap();
        whole.push(b'\n');
        let cut = serde_json::to_vec(&rec(2)).unwrap();
        // Cut inside the text, and once more inside a UTF-8 sequence.
        for tail in [
            &cut[..cut.len() / 2],
            "{\"raw\":\"\u{e9}".as_bytes().split_last().unwrap().1,
        ] {
            std::fs::write(&path, [&whole[..], tail].concat()).unwrap();
            let mut f = DlqFile::open(path.clone(), 1 << 20).unwrap();
            f.write(&rec(3)).unwrap();
            f.sync().unwrap();
            let mut bad = 0;
            let mut got = Vec::new();
            bad += for_each_record(&path, |r| got.push(r.order_id.unwrap())).unwrap();
            assert_eq!((got, bad), (vec!["o1".to_string(), "o3".to_string()], 1));
        }
    }
}
