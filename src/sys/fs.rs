//! Reserving file space ahead of the writes into it (the order journal's
//! segments: an `fdatasync` of writes into reserved space flushes data
//! only, not a file that grew). Linux `fallocate`; elsewhere unsupported,
//! and the file grows as it is written.

use std::fs::File;
use std::io;

/// Reserves `len` bytes of `file` from its start (the file reads as zeros
/// past what was written).
///
/// # Errors
/// The OS error, or `Unsupported` where there is no `fallocate`.
pub(crate) fn reserve(file: &File, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len)
            .map_err(io::Error::from)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, len);
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Writes all of `buf` at `offset` of `file` (the file's cursor is not
/// used or moved).
///
/// # Errors
/// The OS error.
pub(crate) fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.write_all(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_space_reads_as_zeros_and_sets_the_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = File::create(&path).unwrap();
        match reserve(&f, 1 << 16) {
            Ok(()) => {
                assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 16);
                assert!(std::fs::read(&path).unwrap().iter().all(|&b| b == 0));
            }
            // A file system without fallocate: nothing reserved, nothing broken.
            Err(e) => assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "{e}"),
        }
    }
}
