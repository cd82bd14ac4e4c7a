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
//!
//! When a call fails (another OS, an option the kernel does not know), the
//! caller falls back: no low-water mark means the kernel queue is bounded
//! only by `--sub-sndbuf`; no queue size means it counts as empty and the
//! drain rate is measured from writes alone (see docs/decisions.md).
//!
//! Linux only; on other systems both report `Unsupported`.

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
    fn a_non_socket_is_an_error() {
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(send_queue_bytes(&f).is_err());
        assert!(set_notsent_lowat(&f, 1).is_err());
    }
}
