//! A stream's reads: from the receive channel the home worker fills, a peek's bytes
//! first; the end of the stream and the connection's error in the order a socket
//! reports them; blocking, non-blocking and timed.

use super::{copy_front, RxCursor, TcpStream};
use crate::park::Interest;
use std::io::{self, Read};
use std::sync::atomic::Ordering;

impl TcpStream {
    /// One read that never blocks: bytes, 0 at the end of the stream, the
    /// connection's error once everything before it was read, or `WouldBlock`.
    pub(crate) fn read_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        if self.read_shut() {
            return self.end_of_stream(true);
        }
        let n = {
            let mut c = self.rx_cursor.lock().unwrap_or_else(|e| e.into_inner());
            let mut k = 0;
            if !c.peeked.is_empty() {
                k = copy_front(&c.peeked, buf);
                c.peeked.drain(..k);
                self.s.rx_peeked.store(c.peeked.len(), Ordering::Release);
            }
            k + self.s.rx.pop_into(&mut c.partial, &mut buf[k..])
        };
        if n > 0 {
            // Room in the channel: the worker may move more and open the window.
            self.kick();
            return Ok(n);
        }
        self.nothing_to_read(true)
    }

    /// A read without a copy (as smoltcp's `recv(|buf| …)`): `f` is lent the bytes
    /// waiting to be read where they lie, piece by piece (in the channel's chunks,
    /// or in the received packets' buffers themselves, up to `max` bytes in all)
    /// and returns how many of each piece it consumed; taking less than a whole
    /// piece ends the call. Returns the bytes consumed. Blocks, times out and ends
    /// as `read` does: at least one byte is lent unless the stream is over (`Ok(0)`)
    /// or non-blocking with nothing waiting (`WouldBlock`); `Ok(0)` also when `f`
    /// took nothing of the first piece it was lent.
    ///
    /// ```no_run
    /// # fn demo(c: &net::TcpStream) -> std::io::Result<()> {
    /// // Checksum a stream without copying it out of the stack's buffers.
    /// let mut sum = 0u64;
    /// loop {
    ///     let n = c.read_with(usize::MAX, |piece| {
    ///         sum += piece.iter().map(|&b| u64::from(b)).sum::<u64>();
    ///         piece.len()
    ///     })?;
    ///     if n == 0 {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read_with(&self, max: usize, mut f: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        if max == 0 {
            return Ok(0);
        }
        self.read_blocking(|| self.read_with_now(max, &mut f))
    }

    fn read_with_now(&self, max: usize, f: &mut impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        if self.read_shut() {
            return self.end_of_stream(true);
        }
        let mut offered = false;
        let mut f = |b: &[u8]| {
            offered = true;
            f(b)
        };
        let n = {
            let mut c = self.rx_cursor.lock().unwrap_or_else(|e| e.into_inner());
            let mut k = 0;
            if !c.peeked.is_empty() {
                // What a peek took out of the channel comes first.
                let (a, b) = c.peeked.as_slices();
                let mut short = false;
                for piece in [a, b] {
                    let piece = &piece[..piece.len().min(max - k)];
                    if piece.is_empty() {
                        continue;
                    }
                    let took = f(piece).min(piece.len());
                    k += took;
                    if took < piece.len() {
                        short = true;
                        break;
                    }
                }
                c.peeked.drain(..k);
                self.s.rx_peeked.store(c.peeked.len(), Ordering::Release);
                if short || k == max {
                    drop(c);
                    self.kick();
                    return Ok(k);
                }
            }
            k + self.s.rx.drain_with(&mut c.partial, max - k, &mut f)
        };
        if n > 0 {
            // Room in the channel: the worker may move more and open the window.
            self.kick();
            return Ok(n);
        }
        if offered {
            // `f` declined what it was lent: its choice, not a reason to wait.
            return Ok(0);
        }
        self.nothing_to_read(true)
    }

    /// What a read that found no bytes says: the end (or the connection's error)
    /// once the worker raised `rx_eof` after its last push and the channel is
    /// empty, else `WouldBlock`. A peek (`!consume`) leaves the error to be
    /// reported again, as FreeBSD's `MSG_PEEK` leaves `so_error`.
    fn nothing_to_read(&self, consume: bool) -> io::Result<usize> {
        if self.s.rx_eof.load(Ordering::Acquire) && self.s.rx.is_empty() {
            return self.end_of_stream(consume);
        }
        Err(io::ErrorKind::WouldBlock.into())
    }

    /// The end of the stream: the connection's error, the first time, else 0.
    fn end_of_stream(&self, consume: bool) -> io::Result<usize> {
        match self.report_error(consume) {
            Some(e) => Err(e),
            None => Ok(0),
        }
    }

    /// A read (`op`) that blocks, times out and ends as `read` does.
    fn read_blocking(&self, op: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
        let s = &self.s;
        self.blocking(
            &self.read_timeout,
            Interest::Read,
            "read timed out",
            op,
            || {
                !s.rx.is_empty()
                    || s.rx_eof.load(Ordering::Acquire)
                    || s.rd_shut.load(Ordering::Acquire)
                    || self.peeked_len() > 0
            },
        )
    }

    /// `recv(MSG_PEEK)`: copies up to `buf.len()` of the bytes waiting to be read
    /// without consuming them (the next read returns them again); blocks, times
    /// out and ends as `read` does.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.read_blocking(|| self.peek_now(buf))
    }

    pub(super) fn peeked_len(&self) -> usize {
        self.s.rx_peeked.load(Ordering::Acquire)
    }

    fn peek_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        if self.read_shut() {
            return self.end_of_stream(false);
        }
        let mut c = self.rx_cursor.lock().unwrap_or_else(|e| e.into_inner());
        let want = buf.len().saturating_sub(c.peeked.len());
        if want > 0 {
            // Moves what the look needs out of the channel, behind what was
            // looked at before; counted as peeked before they leave the channel,
            // so the worker always finds them in one place or the other.
            self.s
                .rx_peeked
                .store(c.peeked.len() + want, Ordering::Release);
            let RxCursor { partial, peeked } = &mut *c;
            self.s.rx.drain_with(partial, want, |b| {
                peeked.extend(b);
                b.len()
            });
            self.s.rx_peeked.store(c.peeked.len(), Ordering::Release);
        }
        let n = copy_front(&c.peeked, buf);
        if n > 0 {
            return Ok(n);
        }
        self.nothing_to_read(false)
    }

    fn do_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.read_blocking(|| self.read_now(buf))
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.do_read(buf)
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.do_read(buf)
    }
}
