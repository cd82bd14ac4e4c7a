//! What the kernel tells about a TCP socket's send side, for the
//! subscriber commit budget ([`crate::publish::commit_budget`]):
//!
//! - `TCP_NOTSENT_LOWAT` ([`set_notsent_lowat`]): once a subscriber is
//!   paced, the kernel keeps at most about this many bytes *unsent* in its
//!   queue (a write past it returns `WouldBlock`, and the socket reports
//!   writable only when fewer are unsent), so bytes the engine has not
//!   committed stay in the engine, where they can still be conflated.
//! - `SIOCOUTQ` ([`send_queue_bytes`]): bytes in the send queue not yet
//!   acknowledged by the peer (unsent + in flight). With the engine's own
//!   count of bytes written it gives the bytes the peer has taken, whose
//!   rate is the subscriber's drain rate.
//! - `TCP_INFO`'s `tcpi_snd_wnd` ([`peer_window`]): the receive window the
//!   peer advertised in its last acknowledgement, in bytes (already scaled).
//!   As a reader falls behind, its kernel keeps acknowledged bytes it has
//!   not read and its window shrinks: the budget estimates those held bytes
//!   from it ([`crate::publish::peer_window`]).
//!
//! When a call fails (another OS, an option the kernel does not know), the
//! caller falls back: no low-water mark means the kernel queue is bounded
//! only by `--sub-sndbuf`; no queue size means it counts as empty and the
//! drain rate is measured from writes alone; no window (a kernel older
//! than 5.4 answers `TCP_INFO` with a struct that ends before
//! `tcpi_snd_wnd`) means the reader's held bytes are unknown and count as
//! none, the behaviour before (see docs/src/decisions.md).
//!
//! Linux only (the window: glibc targets, whose `libc::tcp_info` has the
//! field); elsewhere each reports `Unsupported`.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// Sets `TCP_NOTSENT_LOWAT` on `sock` to `bytes`.
///
/// # Errors
/// The kernel refused the option (or the OS has none).
pub(crate) fn set_notsent_lowat<S: AsFd>(sock: &S, bytes: u32) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        socket2::SockRef::from(sock).set_tcp_notsent_lowat(bytes)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (sock, bytes);
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Bytes in `sock`'s send queue not yet acknowledged by the peer
/// (`SIOCOUTQ`, the same number as `TIOCOUTQ`).
///
/// # Errors
/// The ioctl failed (not a TCP socket, or not Linux).
pub(crate) fn send_queue_bytes<S: AsFd>(sock: &S) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    {
        let mut n: libc::c_int = 0;
        // SAFETY: SIOCOUTQ (= TIOCOUTQ) on a socket writes one `int` through
        // the pointer, which points at `n`, alive and writable for the call;
        // a descriptor that is not a socket makes the call fail, checked below.
        let rc = unsafe { libc::ioctl(sock.as_fd().as_raw_fd(), libc::TIOCOUTQ, &mut n) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(usize::try_from(n).unwrap_or(0))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = sock;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Bytes in `sock`'s receive queue not yet read by the application
/// (`FIONREAD`, the same number as `SIOCINQ`): what a reader's own kernel
/// holds for it. The tools' slow reader reports it; the engine cannot see
/// its peer's, hence [`peer_window`].
///
/// # Errors
/// The ioctl failed (not a socket, or not Linux).
pub fn receive_queue_bytes<S: AsFd>(sock: &S) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD on a socket writes one `int` through the pointer,
        // which points at `n`, alive and writable for the call; a descriptor
        // that is not a socket makes the call fail, checked below.
        let rc = unsafe { libc::ioctl(sock.as_fd().as_raw_fd(), libc::FIONREAD, &mut n) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(usize::try_from(n).unwrap_or(0))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = sock;
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// The receive window `sock`'s peer advertised last, bytes (`TCP_INFO`'s
/// `tcpi_snd_wnd`, scaled by the kernel): `Ok(None)` when the kernel's
/// struct ends before that field (Linux < 5.4).
///
/// One `getsockopt` into a struct on the stack: no allocation.
///
/// # Errors
/// The call failed (not a TCP socket, or not Linux).
pub(crate) fn peer_window<S: AsFd>(sock: &S) -> io::Result<Option<u32>> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: an all-zero `tcp_info` (integers only) is a valid value.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: TCP_INFO writes at most `len` bytes into `info`, which is
        // alive, writable and `len` bytes long for the call, and stores the
        // length written in `len`; a descriptor that is not a TCP socket
        // makes the call fail, checked below.
        let rc = unsafe {
            libc::getsockopt(
                sock.as_fd().as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                std::ptr::from_mut(&mut info).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let end = std::mem::offset_of!(libc::tcp_info, tcpi_snd_wnd) + 4;
        Ok((len as usize >= end).then_some(info.tcpi_snd_wnd))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = sock;
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn the_send_queue_counts_bytes_the_peer_has_not_read_past_its_window() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        socket2::SockRef::from(&b)
            .set_recv_buffer_size(4096)
            .unwrap();
        assert_eq!(send_queue_bytes(&a).unwrap(), 0);
        set_notsent_lowat(&a, 16 * 1024).unwrap();
        a.set_nonblocking(true).unwrap();
        let chunk = [7u8; 4096];
        let mut sent = 0usize;
        while sent < 4 << 20 {
            match a.write(&chunk) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        // The peer reads nothing: what its small window did not take stays
        // queued here, and the low-water mark stopped the writes early.
        let q = send_queue_bytes(&a).unwrap();
        assert!(q > 0 && q <= sent, "queued {q} of {sent}");
        assert!(sent < 4 << 20, "the writes never blocked");
        drop(b);
    }

    #[test]
    fn the_peer_window_shrinks_as_the_reader_holds_unread_bytes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        // A few bytes through, so the peer has acknowledged with its window.
        a.write_all(b"x").unwrap();
        let mut one = [0u8; 1];
        std::io::Read::read_exact(&mut &b, &mut one).unwrap();
        let Some(open) = wait_window(&a, |w| w > 0) else {
            return; // a kernel without tcpi_snd_wnd: nothing to check
        };
        // The peer reads nothing more: what it acknowledges it holds, and
        // its window closes (bounded: the writes stop at WouldBlock).
        a.set_nonblocking(true).unwrap();
        let chunk = [7u8; 4096];
        loop {
            match a.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let closed = wait_window(&a, |w| w < open / 2).expect("a window");
        assert!(closed < open, "window {closed} of {open}");
        drop(b);
    }

    /// Samples `a`'s peer window until `ok` holds (acks arrive after the
    /// write returns): `None` when the kernel reports no window.
    fn wait_window(a: &TcpStream, ok: impl Fn(u32) -> bool) -> Option<u32> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let w = peer_window(a).unwrap()?;
            if ok(w) || std::time::Instant::now() > deadline {
                return Some(w);
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_non_socket_is_an_error() {
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(send_queue_bytes(&f).is_err());
        assert!(set_notsent_lowat(&f, 1).is_err());
        assert!(peer_window(&f).is_err());
    }
}
