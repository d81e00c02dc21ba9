//! Network namespaces: moving the calling thread into one (`setns(2)`), so that a
//! thread of a benchmark or a test can be a Linux TCP peer inside a namespace it made
//! (`ip netns add`), with the kernel's sockets there, while the rest of the process
//! stays where it was.

use std::io;
use std::os::fd::AsRawFd;

/// Moves the calling thread into the network namespace `name` (as `ip netns exec`
/// does for a process: the file `/run/netns/<name>` that `ip netns add` made).
/// Sockets the thread opens afterwards belong to that namespace; other threads are
/// not affected. Needs `CAP_SYS_ADMIN`.
pub fn enter(name: &str) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a namespace name"),
        ));
    }
    let f = std::fs::File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns(2) with a descriptor we own (open for the call's duration) and
    // a constant flag; it changes only the calling thread's namespace and touches
    // no memory of ours.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_a_missing_namespace_is_an_error() {
        for bad in ["", "../x", "a/b", ".hidden"] {
            assert_eq!(
                enter(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        let e = std::thread::spawn(|| enter("mpstack-no-such-namespace-here"))
            .join()
            .unwrap();
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
