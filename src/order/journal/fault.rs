//! Fault injection for benchmarks and tests of the binary: a journal disk
//! whose every `fdatasync` takes a fixed time longer (a stalled or
//! saturated disk), turned on by `TICKFAN_FAULT_FSYNC_MS=<ms>` in the
//! environment of `tickfan serve`. Off by default; never set it in
//! production. In-process tests hold syncs on a gate of their own instead
//! (`runtime::Injected::journal_files`).

use std::io;
use std::time::Duration;

use super::files::{Files, JournalFile, JournalFiles, WrapFiles};

/// The environment variable that slows every journal sync, in ms.
pub const FSYNC_FAULT_ENV: &str = "TICKFAN_FAULT_FSYNC_MS";

/// The journal files of the engine, each sync `delay` slower.
pub fn slow_sync(delay: Duration) -> WrapFiles {
    WrapFiles(Box::new(move |inner| {
        Box::new(SlowSyncFiles { inner, delay }) as Files
    }))
}

/// The delay `TICKFAN_FAULT_FSYNC_MS` asks for (`None`: unset or 0).
///
/// # Errors
/// A value that is not a whole number of milliseconds.
pub fn slow_sync_from_env() -> Result<Option<Duration>, String> {
    std::env::var(FSYNC_FAULT_ENV)
        .ok()
        .map_or(Ok(None), |v| parse_ms(&v))
}

fn parse_ms(v: &str) -> Result<Option<Duration>, String> {
    match v.trim().parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(ms) => Ok(Some(Duration::from_millis(ms))),
        Err(_) => Err(format!(
            "{FSYNC_FAULT_ENV}={v:?}: expected a whole number of milliseconds"
        )),
    }
}

struct SlowSyncFiles {
    inner: Files,
    delay: Duration,
}

impl JournalFiles for SlowSyncFiles {
    fn create(&mut self, segment: u64) -> io::Result<Box<dyn JournalFile>> {
        Ok(Box::new(SlowSync {
            inner: self.inner.create(segment)?,
            delay: self.delay,
        }))
    }

    fn remove(&mut self, segment: u64) -> io::Result<()> {
        self.inner.remove(segment)
    }
}

struct SlowSync {
    inner: Box<dyn JournalFile>,
    delay: Duration,
}

impl JournalFile for SlowSync {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        // The injected stall: the journal thread is blocked here, as in a
        // real `fdatasync` on a stalled disk.
        std::thread::sleep(self.delay);
        self.inner.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::journal::files::DirFiles;

    #[test]
    fn the_slow_disk_writes_syncs_and_cuts_the_real_file() {
        let dir = tempfile::tempdir().unwrap();
        let inner: Files = Box::new(DirFiles {
            dir: dir.path().to_path_buf(),
            reserve: 0,
        });
        let mut files = (slow_sync(Duration::from_millis(1)).0)(inner);
        let mut f = files.create(1).unwrap();
        f.write_all(b"abcdef").unwrap();
        f.sync_data().unwrap();
        f.truncate(3).unwrap();
        f.write_all(b"xy").unwrap();
        let path = dir
            .path()
            .join(crate::order::journal::segment::file_name(1));
        assert_eq!(std::fs::read(&path).unwrap(), b"abcxy");
        files.remove(1).unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn the_knob_is_whole_milliseconds_and_zero_is_off() {
        assert_eq!(parse_ms("2000"), Ok(Some(Duration::from_secs(2))));
        assert_eq!(parse_ms(" 5 "), Ok(Some(Duration::from_millis(5))));
        assert_eq!(parse_ms("0"), Ok(None));
        let e = parse_ms("2s").unwrap_err();
        assert!(e.contains("TICKFAN_FAULT_FSYNC_MS"), "{e}");
    }
}
