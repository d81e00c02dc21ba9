//! The bulk transfer that the tests, the example, `mpstack bench quic` and `quic-peer`
//! share, so that mpstack's endpoints and the kernel's speak the same protocol.
//!
//! A client opens one or more bidirectional streams on a connection. On each it writes
//! a 24-byte header (bytes up, bytes down, the pattern's seed; big-endian u64s), then
//! the `up` bytes of the pattern, and finishes its side; the server checks every byte
//! it receives against the pattern at its offset, then writes `down` bytes of the
//! pattern of `seed + 1` and finishes; the client checks those the same way. A stream
//! whose bytes differ anywhere, or whose length differs, is an error: a transfer that
//! ends without one was byte-exact.
//!
//! The pattern is [`Pattern`]: pseudo-random bytes repeating with a prime period of
//! about 1 MiB, so that a lost, duplicated or reordered range of any length that is
//! not a multiple of the period shows as a mismatch at once, and a multiple of it as a
//! wrong length; checking costs a `memcmp`, not a hash, and the sender writes slices
//! of the pattern without copying them.

use bytes::Bytes;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The pattern's period in bytes (a prime, so it never lines up with chunk sizes).
const PERIOD: usize = 1_048_573;

/// Bytes of one write.
const CHUNK: usize = 64 << 10;

/// Pseudo-random bytes from a seed, repeating every [`PERIOD`] bytes.
#[derive(Clone, Debug)]
pub struct Pattern {
    /// The period, then its first [`CHUNK`] bytes again, so that a chunk starting
    /// anywhere in the period is one slice.
    table: Bytes,
}

impl Pattern {
    pub fn new(seed: u64) -> Pattern {
        let mut v = Vec::with_capacity(PERIOD + CHUNK);
        let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
        while v.len() < PERIOD {
            // splitmix64
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            v.extend_from_slice(&z.to_le_bytes());
        }
        v.truncate(PERIOD);
        v.extend_from_within(..CHUNK);
        Pattern { table: v.into() }
    }

    /// The pattern's `len` bytes (at most [`CHUNK`]) from stream offset `off`.
    fn slice(&self, off: u64, len: usize) -> Bytes {
        let s = (off % PERIOD as u64) as usize;
        self.table.slice(s..s + len.min(CHUNK))
    }

    /// True if `data` is the pattern from stream offset `off`.
    pub fn matches(&self, off: u64, data: &[u8]) -> bool {
        let mut off = off;
        for part in data.chunks(CHUNK) {
            if self.slice(off, part.len()) != part {
                return false;
            }
            off += part.len() as u64;
        }
        true
    }
}

/// Why a transfer failed.
#[derive(Debug)]
pub enum XferError {
    Connect(String),
    Stream(String),
    /// Bytes differ from the pattern at this offset of a stream.
    Corrupt {
        stream: u64,
        offset: u64,
    },
    /// A stream ended with this many bytes instead of the expected.
    Length {
        stream: u64,
        got: u64,
        want: u64,
    },
}

impl fmt::Display for XferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XferError::Connect(e) => write!(f, "connection: {e}"),
            XferError::Stream(e) => write!(f, "stream: {e}"),
            XferError::Corrupt { stream, offset } => write!(
                f,
                "stream {stream}: bytes differ from the pattern at offset {offset}"
            ),
            XferError::Length { stream, got, want } => {
                write!(f, "stream {stream}: {got} bytes instead of {want}")
            }
        }
    }
}

impl std::error::Error for XferError {}

fn stream_err(e: impl fmt::Display) -> XferError {
    XferError::Stream(e.to_string())
}

/// Writes `len` bytes of `pat` on `s`, then finishes it.
async fn send_pattern(s: &mut quinn::SendStream, pat: &Pattern, len: u64) -> Result<(), XferError> {
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(CHUNK as u64) as usize;
        s.write_chunk(pat.slice(off, n)).await.map_err(stream_err)?;
        off += n as u64;
    }
    s.finish().map_err(stream_err)
}

/// Reads `r` to its end, checking every byte against `pat` (whose offset 0 is the
/// stream's offset `base`); counts into `progress`.
async fn recv_pattern(
    r: &mut quinn::RecvStream,
    pat: &Pattern,
    want: u64,
    base: u64,
    progress: Option<&AtomicU64>,
) -> Result<(), XferError> {
    let id = r.id().index();
    let mut got = 0u64;
    while let Some(c) = r.read_chunk(CHUNK, false).await.map_err(stream_err)? {
        let off = c.offset.wrapping_sub(base);
        if c.offset < base || !pat.matches(off, &c.bytes) {
            return Err(XferError::Corrupt {
                stream: id,
                offset: c.offset,
            });
        }
        got += c.bytes.len() as u64;
        if let Some(p) = progress {
            p.fetch_add(c.bytes.len() as u64, Ordering::Relaxed);
        }
        if got > want {
            break;
        }
    }
    if got != want {
        return Err(XferError::Length {
            stream: id,
            got,
            want,
        });
    }
    Ok(())
}

/// The header's length: bytes up, bytes down, seed.
const HEADER: u64 = 24;

/// The client's side: `streams` streams at once (at least one), `up` bytes to the
/// server and `down` bytes back in all, split evenly over them; every byte checked.
/// `progress` counts the bytes the client receives. Returns when every stream is done
/// (the caller closes the connection). Call it inside a tokio runtime.
pub async fn client(
    conn: &quinn::Connection,
    up: u64,
    down: u64,
    streams: usize,
    progress: Option<Arc<AtomicU64>>,
) -> Result<(), XferError> {
    let k = streams.max(1) as u64;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..k {
        let share = |total: u64| total / k + u64::from(i < total % k);
        let (u, d) = (share(up), share(down));
        let conn = conn.clone();
        let progress = progress.clone();
        set.spawn(async move {
            let (mut tx, mut rx) = conn.open_bi().await.map_err(stream_err)?;
            let seed = 2 * i + 1;
            let mut hdr = [0u8; HEADER as usize];
            hdr[..8].copy_from_slice(&u.to_be_bytes());
            hdr[8..16].copy_from_slice(&d.to_be_bytes());
            hdr[16..].copy_from_slice(&seed.to_be_bytes());
            tx.write_all(&hdr).await.map_err(stream_err)?;
            let (pu, pd) = (Pattern::new(seed), Pattern::new(seed + 1));
            let (s, r) = tokio::join!(
                send_pattern(&mut tx, &pu, u),
                recv_pattern(&mut rx, &pd, d, 0, progress.as_deref())
            );
            s.and(r)
        });
    }
    while let Some(r) = set.join_next().await {
        r.map_err(|e| XferError::Stream(format!("stream task: {e}")))??;
    }
    Ok(())
}

/// The server's side of one connection: serves each stream the client opens, until
/// the client closes the connection. `progress` counts the bytes the server receives.
/// Returns the bytes received. Call it inside a tokio runtime.
pub async fn serve(
    conn: quinn::Connection,
    progress: Option<Arc<AtomicU64>>,
) -> Result<u64, XferError> {
    let mut set = tokio::task::JoinSet::new();
    loop {
        let (mut tx, mut rx) = match conn.accept_bi().await {
            Ok(s) => s,
            Err(quinn::ConnectionError::ApplicationClosed(_))
            | Err(quinn::ConnectionError::LocallyClosed) => break,
            Err(e) => return Err(XferError::Connect(e.to_string())),
        };
        let progress = progress.clone();
        set.spawn(async move {
            let mut hdr = [0u8; HEADER as usize];
            rx.read_exact(&mut hdr).await.map_err(stream_err)?;
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&hdr[i..i + 8]);
                u64::from_be_bytes(w)
            };
            let (u, d, seed) = (word(0), word(8), word(16));
            recv_pattern(&mut rx, &Pattern::new(seed), u, HEADER, progress.as_deref()).await?;
            send_pattern(&mut tx, &Pattern::new(seed.wrapping_add(1)), d).await?;
            // Until the client has read it all (it closes the connection then).
            let _ = tx.stopped().await;
            Ok::<u64, XferError>(u)
        });
    }
    let mut total = 0;
    while let Some(r) = set.join_next().await {
        total += r.map_err(|e| XferError::Stream(format!("stream task: {e}")))??;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_tells_its_offset() {
        let p = Pattern::new(7);
        let whole: Vec<u8> = (0..40u64)
            .flat_map(|i| p.slice(i * 50_000, 50_000).to_vec())
            .collect();
        assert!(p.matches(0, &whole));
        assert!(p.matches(123_457, &whole[123_457..]));
        assert!(!p.matches(1, &whole[..1000]));
        let mut bad = whole[..200_000].to_vec();
        bad[150_000] ^= 1;
        assert!(!p.matches(0, &bad));
        assert!(!Pattern::new(8).matches(0, &whole[..100]));
        // The period wraps: a slice across it is still the pattern.
        let off = PERIOD as u64 - 10;
        let across = p.slice(off, 100);
        assert!(p.matches(off, &across));
        assert_eq!(&across[10..20], &whole[..10]);
    }
}

/// What [`between`] moves.
#[derive(Clone, Debug, Default)]
pub struct Transfer {
    /// Bytes from the client to the server.
    pub up: u64,
    /// Bytes from the server to the client.
    pub down: u64,
    /// Streams they are split over (at least one).
    pub streams: usize,
    /// Counts the bytes either side received.
    pub progress: Option<Arc<AtomicU64>>,
}

/// One whole transfer between two endpoints of this process: `client_ep` connects to
/// `server` (at `to`, certificate name `name`), moves `job` over it, closes, and waits
/// for the server's side to finish. Returns the time from the established connection
/// to the last byte checked on both sides.
pub async fn between(
    server: &quinn::Endpoint,
    client_ep: &quinn::Endpoint,
    to: std::net::SocketAddr,
    name: &str,
    job: Transfer,
) -> Result<std::time::Duration, XferError> {
    let Transfer {
        up,
        down,
        streams,
        progress,
    } = job;
    let accept = {
        let server = server.clone();
        let progress = progress.clone();
        tokio::spawn(async move {
            let inc = server
                .accept()
                .await
                .ok_or_else(|| XferError::Connect("the server endpoint closed".into()))?;
            let conn = inc.await.map_err(|e| XferError::Connect(e.to_string()))?;
            serve(conn, progress).await
        })
    };
    let conn = client_ep
        .connect(to, name)
        .map_err(|e| XferError::Connect(e.to_string()))?
        .await
        .map_err(|e| XferError::Connect(e.to_string()))?;
    let t0 = std::time::Instant::now();
    let r = client(&conn, up, down, streams, progress).await;
    conn.close(0u32.into(), b"done");
    let got = accept
        .await
        .map_err(|e| XferError::Stream(format!("server task: {e}")))?;
    let secs = t0.elapsed();
    r?;
    let got = got?;
    if got != up {
        return Err(XferError::Length {
            stream: u64::MAX,
            got,
            want: up,
        });
    }
    Ok(secs)
}
