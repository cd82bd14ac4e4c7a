//! One engine per data directory: an exclusive lock on
//! `<data-dir>/tickfan.lock`, held for the engine's life, with the holder's
//! pid written in the file so a second engine can name it.
//!
//! Two engines appending to one journal (or one dead-letter file) would
//! interleave their records and each would recover the other's orders, so
//! the second engine must not start. The lock is `flock(2)` (std's
//! [`File::try_lock`]):
//!
//! - the OS drops it when the process ends, however it ends (`kill -9`
//!   included), so a lock file left behind never blocks a restart: the
//!   next engine locks it and writes its own pid over the old one;
//! - the file is never deleted: removing a lock file races with the next
//!   engine opening it (both would then hold "the" lock on two files);
//! - the pid is written after the lock is taken, and the file is opened
//!   without truncating, so a refused engine never erases the holder's
//!   pid. A reader that comes between the lock and the write sees no pid:
//!   that is why the pid is "when known".
//!
//! # Portability
//! `flock` is advisory: it stops another tickfan, not another program.
//! Within one process two [`DirLock`]s on one directory exclude each other
//! too (each open file description holds its own lock). On a file system
//! without locks (some network mounts) acquiring fails with the OS error
//! rather than running unprotected.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "tickfan.lock";

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub(crate) struct DirLock {
    /// The open lock file: the lock lives as long as this descriptor.
    _file: File,
}

/// The data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum DirLockError {
    /// Another engine holds it: give this one its own `--data-dir` (or stop
    /// the other).
    #[error(
        "data directory {} is in use by {}: give this engine its own --data-dir",
        .dir.display(),
        holder(*.pid)
    )]
    Held {
        /// The directory.
        dir: PathBuf,
        /// The holder's pid, as it wrote it into the lock file (`None` when
        /// the file holds none yet, or not a number).
        pid: Option<u32>,
    },
    /// The directory or its lock file cannot be created, opened or locked
    /// (permissions, a read-only or lock-less file system).
    #[error("cannot lock data directory {}: {source}", .dir.display())]
    Io {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(p) => format!("another tickfan (pid {p})"),
        None => "another tickfan".to_owned(),
    }
}

impl DirLock {
    /// Creates `dir` when missing and locks it for this process, writing
    /// this process's pid into the lock file. Never waits.
    ///
    /// # Errors
    /// [`DirLockError::Held`] when another engine holds it;
    /// [`DirLockError::Io`] when it cannot be created, opened or locked.
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock, DirLockError> {
        let io = |source| DirLockError::Io {
            dir: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let path = dir.join(LOCK_FILE);
        // No truncation here: until the lock is ours, the pid in the file
        // is the holder's.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let pid = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok());
                return Err(DirLockError::Held {
                    dir: dir.to_path_buf(),
                    pid,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(DirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let first = DirLock::acquire(&dir).expect("a free directory locks");
        let text = std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap();
        assert_eq!(text, format!("{}\n", std::process::id()));
        match DirLock::acquire(&dir) {
            Err(DirLockError::Held { dir: d, pid }) => {
                assert_eq!((d, pid), (dir.clone(), Some(std::process::id())));
            }
            other => panic!("second lock: {other:?}"),
        }
        // The refused attempt left the holder's pid in place.
        assert_eq!(std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap(), text);
        drop(first);
        DirLock::acquire(&dir).expect("free again once dropped");
    }

    #[test]
    fn a_stale_lock_file_with_another_pid_does_not_block() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(LOCK_FILE), "4000000000\nlonger old text\n").unwrap();
        let _l = DirLock::acquire(tmp.path()).expect("an unlocked file is free");
        let text = std::fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap();
        assert_eq!(text, format!("{}\n", std::process::id()));
    }

    #[test]
    fn the_refusal_is_one_line_with_the_directory_the_pid_and_the_flag() {
        let e = DirLockError::Held {
            dir: PathBuf::from("tickfan-data"),
            pid: Some(4242),
        };
        assert_eq!(
            e.to_string(),
            "data directory tickfan-data is in use by another tickfan (pid 4242): give this engine its own --data-dir"
        );
        let e = DirLockError::Held {
            dir: PathBuf::from("d"),
            pid: None,
        };
        assert!(!e.to_string().contains("pid"), "{e}");
    }
}
