//! A stream's writes: into the send channel the home worker drains (bytes copied into
//! the packet buffer being filled, or a whole `Mbuf` handed over), `BrokenPipe`
//! after a shutdown, blocking, non-blocking and timed.

use super::TcpStream;
use crate::park::Interest;
use crate::tcp::chan::phase;
use std::io::{self, Write};
use std::sync::atomic::Ordering;

impl TcpStream {
    /// One write that never blocks: how much of `buf` was queued, the connection's
    /// error, `BrokenPipe` after a shutdown or close, or `WouldBlock` when the send
    /// channel is full (the home worker is told to drain it).
    pub(crate) fn write_now(&self, buf: &[u8]) -> io::Result<usize> {
        self.writable()?;
        let n = {
            let mut fill = self.tx_fill.lock().unwrap_or_else(|e| e.into_inner());
            self.s.tx.push_filling(buf, &mut fill)
        };
        self.kick();
        if n > 0 || buf.is_empty() {
            Ok(n)
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }

    /// A write without a copy of its own: `f` is lent room for up to `max` bytes
    /// (one piece, as much as the send channel takes now) in the packet buffer
    /// the connection's writes fill, writes its data there and returns how many
    /// bytes it wrote; the segments and a receiver on this machine then take
    /// those bytes by reference. The room lent holds old bytes (not zeroes).
    /// Returns the bytes taken. Blocks (for room), times out and fails as `write`
    /// does; `Ok(0)` when `f` wrote nothing.
    ///
    /// ```no_run
    /// # fn demo(c: &net::TcpStream, msg: &[u8]) -> std::io::Result<()> {
    /// // Serialize straight into the stack's buffer.
    /// let mut at = 0;
    /// while at < msg.len() {
    ///     at += c.write_with(msg.len() - at, |room| {
    ///         room.copy_from_slice(&msg[at..at + room.len()]);
    ///         room.len()
    ///     })?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn write_with(
        &self,
        max: usize,
        mut f: impl FnMut(&mut [u8]) -> usize,
    ) -> io::Result<usize> {
        if max == 0 {
            return Ok(0);
        }
        let s = &self.s;
        self.blocking(
            &self.write_timeout,
            Interest::Write,
            "write timed out",
            || self.write_with_now(max, &mut f),
            || s.tx.space() > 0 || s.phase.load(Ordering::Acquire) == phase::CLOSED,
        )
    }

    fn write_with_now(
        &self,
        max: usize,
        f: &mut impl FnMut(&mut [u8]) -> usize,
    ) -> io::Result<usize> {
        self.writable()?;
        if self.s.tx.space() == 0 {
            self.kick();
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = {
            let mut fill = self.tx_fill.lock().unwrap_or_else(|e| e.into_inner());
            self.s.tx.push_with(max, &mut fill, &mut *f)
        };
        self.kick();
        Ok(n)
    }

    /// A write that gives the stack the application's packet buffer instead of
    /// copying from it: bytes are taken off the front of `m` by reference (its
    /// buffers become the send buffer's, then the segments'), as many as the send
    /// channel has room for; `m` keeps the rest. Returns the bytes taken. Blocks
    /// (for room), times out and fails as `write` does; `Ok(0)` when `m` is empty.
    /// A packet buffer from a netchannel or a read can so go out again untouched:
    ///
    /// ```no_run
    /// # fn demo(c: &net::TcpStream, p: net::Packet) -> std::io::Result<()> {
    /// // Forward a UDP datagram's payload, taken raw, into a TCP stream.
    /// let mut m = p.into_mbuf();
    /// m.adj(28); // past the IPv4 and UDP headers
    /// while !m.is_empty() {
    ///     c.write_mbuf(&mut m)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn write_mbuf(&self, m: &mut mbuf::Mbuf) -> io::Result<usize> {
        if m.is_empty() {
            return Ok(0);
        }
        let s = &self.s;
        self.blocking(
            &self.write_timeout,
            Interest::Write,
            "write timed out",
            || {
                self.writable()?;
                // The fill buffer's last piece went out as its own chunk when it
                // was written: these bytes queue after it.
                let n = s.tx.push_mbuf(m);
                self.kick();
                if n > 0 {
                    Ok(n)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                }
            },
            || s.tx.space() > 0 || s.phase.load(Ordering::Acquire) == phase::CLOSED,
        )
    }

    /// Whether the stream takes writes: the connection's error (once, as a read
    /// reports it), or `BrokenPipe` after a shutdown or close.
    fn writable(&self) -> io::Result<()> {
        if let Some(e) = self.report_error(true) {
            return Err(e);
        }
        if self.s.wr_shut.load(Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "socket shut down for writing",
            ));
        }
        if self.s.phase.load(Ordering::Acquire) == phase::CLOSED {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "connection closed",
            ));
        }
        Ok(())
    }

    /// `write`: non-blocking, what the send channel takes now; blocking, all of
    /// `buf`, waiting for room as often as it takes (POSIX: a blocking socket's
    /// write "shall block until all the data is transferred"; Linux's
    /// `sk_stream_wait_memory` loop, FreeBSD's `sosend` with `SB_WAIT`). A short
    /// count only when the write timeout expires or the connection fails after
    /// part of it was queued (the failure is reported by the next call).
    fn do_write(&self, buf: &[u8]) -> io::Result<usize> {
        if self.nonblocking.load(Ordering::Relaxed) {
            return self.write_now(buf);
        }
        let s = &self.s;
        let mut done = 0;
        let r = self.blocking(
            &self.write_timeout,
            Interest::Write,
            "write timed out",
            || {
                if done > 0 && self.pending_error().is_some() {
                    // Left for the next call to report.
                    return Ok(());
                }
                match self.write_now(&buf[done..]) {
                    Ok(n) => done += n,
                    Err(e) if done > 0 && e.kind() != io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) => return Err(e),
                }
                if done == buf.len() {
                    Ok(())
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                }
            },
            || s.tx.space() > 0 || s.phase.load(Ordering::Acquire) == phase::CLOSED,
        );
        match r {
            // Timed out (or made non-blocking meanwhile) after part was queued.
            Err(_) if done > 0 => Ok(done),
            r => r.map(|()| done),
        }
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.do_write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.do_write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
