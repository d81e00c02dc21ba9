//! Sleeping until a device has frames: `poll(2)` over queue descriptors, and an
//! `eventfd` [`Notifier`] that wakes a sleeping worker when an application hands it
//! work (a datagram to send, a configuration change).

use crate::Duration;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Waits on a set of descriptors. Keeps its `pollfd` array between calls so a
/// worker's steady state does not allocate.
#[derive(Debug, Default)]
pub struct Poller {
    pfds: Vec<libc::pollfd>,
}

impl Poller {
    pub fn new() -> Self {
        Poller { pfds: Vec::new() }
    }

    /// Blocks until one of `fds` is readable or `timeout` passes (`None`: forever).
    /// Returns how many are readable; an interrupted wait returns `Ok(0)`.
    pub fn wait(&mut self, fds: &[RawFd], timeout: Option<Duration>) -> io::Result<usize> {
        self.pfds.clear();
        self.pfds.extend(fds.iter().map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        // ppoll(2) takes nanoseconds: a pacing timer of 40 µs sleeps about that
        // (plus the kernel's timer slack), not the millisecond poll(2) rounds to.
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: libc::time_t::try_from(d.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `pfds` is a valid, initialised array of `pfds.len()` pollfd structs
        // that lives across the call; ppoll(2) writes only their `revents` fields.
        // `tsp` is null or points to `ts`, which outlives the call; the signal mask
        // pointer is null (the mask is left as it is).
        let r = unsafe {
            libc::ppoll(
                self.pfds.as_mut_ptr(),
                self.pfds.len() as libc::nfds_t,
                tsp,
                std::ptr::null(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(r as usize)
    }
}

/// A wake-up flag another thread can raise: an `eventfd` that becomes readable.
#[derive(Debug)]
pub struct Notifier {
    fd: OwnedFd,
}

impl Notifier {
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd has no pointer arguments; we check the result.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(Notifier {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Makes the descriptor readable (wakes a `poll` on it). Never blocks.
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd; a full counter
        // (EAGAIN) already means "readable", so the result can be ignored.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Clears the readable state.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; non-blocking, EAGAIN is fine.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifier_wakes_poller_and_drains() {
        let n = Notifier::new().unwrap();
        let mut p = Poller::new();
        assert_eq!(p.wait(&[n.fd()], Some(Duration::ZERO)).unwrap(), 0);
        n.notify();
        n.notify();
        assert_eq!(p.wait(&[n.fd()], Some(Duration::from_secs(5))).unwrap(), 1);
        n.drain();
        assert_eq!(p.wait(&[n.fd()], Some(Duration::ZERO)).unwrap(), 0);
    }

    #[test]
    fn notify_from_another_thread() {
        let n = std::sync::Arc::new(Notifier::new().unwrap());
        let n2 = n.clone();
        let t = std::thread::spawn(move || n2.notify());
        let mut p = Poller::new();
        assert_eq!(p.wait(&[n.fd()], Some(Duration::from_secs(10))).unwrap(), 1);
        t.join().unwrap();
    }
}
