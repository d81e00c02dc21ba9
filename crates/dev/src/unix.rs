//! What a node needs of the host to guard its Unix sockets and files: who it runs
//! as, who is on the other end of a connection (`SO_PEERCRED`), and a listening
//! socket whose mode is set before anyone can connect to it.
//!
//! Here because two of them are C library calls (`unsafe`), which only `dev` and
//! `mbuf` may use; each is wrapped so that callers stay safe.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// The process's effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments, always succeeds and touches no memory
    // of ours.
    unsafe { libc::geteuid() }
}

/// Who is at the other end of a Unix stream connection, as the kernel recorded it
/// when the peer connected (`SO_PEERCRED`, unix(7)): it cannot be forged by the
/// peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// The credentials of `s`'s peer.
pub fn peer_cred(s: &UnixStream) -> io::Result<PeerCred> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the descriptor is open for as long as `s` is borrowed; `c` is a
    // `ucred` that outlives the call and `len` holds its size, so the kernel
    // writes at most that many bytes into it.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::other("SO_PEERCRED: short answer"));
    }
    Ok(PeerCred {
        pid: c.pid,
        uid: c.uid,
        gid: c.gid,
    })
}

/// A Unix stream socket listening at `path` with file mode `mode`, whatever the
/// process's umask: bound, then given its mode, and only then listening. A
/// connect(2) to a socket that is bound but not listening is refused
/// (`ECONNREFUSED`), so there is no moment at which anyone but `mode` allows can
/// connect — unlike `UnixListener::bind` followed by a chmod, which listens first.
pub fn listen_with_mode(path: &Path, mode: u32) -> io::Result<UnixListener> {
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    s.bind(&socket2::SockAddr::unix(path)?)?;
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    if let Err(e) = s.listen(128) {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(UnixListener::from(OwnedFd::from(s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_socket_listens_with_its_mode_and_knows_its_peer() {
        let dir = std::env::temp_dir().join(format!("mpstack-unix-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let l = listen_with_mode(&path, 0o600).unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600);
        let c = UnixStream::connect(&path).unwrap();
        let (s, _) = l.accept().unwrap();
        let p = peer_cred(&s).unwrap();
        assert_eq!((p.uid, p.pid as u32), (euid(), std::process::id()));
        assert_eq!(peer_cred(&c).unwrap().uid, euid());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
