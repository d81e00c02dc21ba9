//! Writing frames as a pcap file that tcpdump and Wireshark read, and a device
//! middleware that records everything a device receives and sends.
//!
//! The format is classic pcap with nanosecond timestamps (magic `0xa1b23c4d`),
//! link type Ethernet (1), snap length 65535.

use crate::{Device, DeviceInfo, Instant, Mbuf, Queue, QueueStats};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The nanosecond-resolution pcap magic number.
pub const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest frame recorded in full.
pub const SNAPLEN: u32 = 65_535;

/// Opens `path` for writing as [`PcapWriter::create`] says: created 0600, or a
/// regular file of ours with one link truncated; never through a symbolic link.
pub fn create_private(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        // O_NONBLOCK: opening a FIFO with no reader fails instead of hanging the
        // node; it is refused below anyway.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    e.kind(),
                    "is a symbolic link; refusing to follow it (give the file itself)",
                )
            } else {
                e
            }
        })?;
    let m = f.metadata()?;
    if !m.file_type().is_file() {
        return Err(io::Error::other(
            "not a regular file; refusing to write to it",
        ));
    }
    if m.uid() != crate::unix::euid() {
        return Err(io::Error::other(format!(
            "owned by uid {}, not by this process's uid {}; refusing to overwrite it",
            m.uid(),
            crate::unix::euid()
        )));
    }
    if m.nlink() != 1 {
        return Err(io::Error::other(format!(
            "has {} names (hard links); refusing to overwrite it",
            m.nlink()
        )));
    }
    f.set_len(0)?;
    if m.mode() & 0o077 != 0 {
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(f)
}

/// A pcap file being written.
pub struct PcapWriter {
    w: Box<dyn Write + Send>,
}

impl std::fmt::Debug for PcapWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PcapWriter")
    }
}

impl PcapWriter {
    /// Creates `path` (mode 0600: a capture holds other people's traffic), or
    /// truncates it if it is a regular file of ours with no other name, and writes
    /// the file header. A symbolic link at `path` is refused, not followed
    /// (`O_NOFOLLOW`), and so is anything else — another user's file, a hard link
    /// to one, a FIFO or a device: a node often runs as root, and a path in a
    /// shared directory must not let someone else choose which file it overwrites.
    pub fn create(path: &Path) -> io::Result<Self> {
        Self::new(Box::new(BufWriter::new(create_private(path)?)))
    }

    /// Writes to any sink (a `Vec<u8>` in tests).
    pub fn new(mut w: Box<dyn Write + Send>) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs: 0
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter { w })
    }

    /// Records one frame with a timestamp of `t` (nanoseconds since the Unix epoch
    /// for real captures; virtual time for simulations).
    pub fn write_frame(&mut self, t: Instant, frame: &[u8]) -> io::Result<()> {
        self.write_parts(t, frame.len(), &mut std::iter::once(frame))
    }

    /// Records a packet held in segments.
    pub fn write_mbuf(&mut self, t: Instant, m: &Mbuf) -> io::Result<()> {
        self.write_parts(t, m.len(), &mut m.segments())
    }

    fn write_parts(
        &mut self,
        t: Instant,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
    ) -> io::Result<()> {
        let ns = t.as_nanos();
        let caplen = len.min(SNAPLEN as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(caplen as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(len.min(u32::MAX as usize) as u32).to_le_bytes());
        self.w.write_all(&h)?;
        let mut left = caplen;
        for p in parts {
            let n = p.len().min(left);
            self.w.write_all(&p[..n])?;
            left -= n;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

impl Drop for PcapWriter {
    fn drop(&mut self) {
        let _ = self.w.flush();
    }
}

/// Timestamps for a recording device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// Wall-clock time, read when a burst is recorded (real devices).
    Wall,
    /// The `now` the worker passes in (simulations: virtual time).
    Now,
}

/// A device that records every frame its queues receive and send.
pub struct PcapDevice {
    inner: Box<dyn Device>,
    w: Arc<Mutex<PcapWriter>>,
    stamp: Stamp,
}

impl std::fmt::Debug for PcapDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapDevice")
            .field("inner", &self.inner.info().name)
            .finish()
    }
}

impl PcapDevice {
    /// Records `inner` with wall-clock timestamps.
    pub fn new(inner: Box<dyn Device>, w: PcapWriter) -> Self {
        PcapDevice {
            inner,
            w: Arc::new(Mutex::new(w)),
            stamp: Stamp::Wall,
        }
    }

    /// Records `inner` with the worker's `now` as the timestamp.
    pub fn with_stamp(inner: Box<dyn Device>, w: PcapWriter, stamp: Stamp) -> Self {
        PcapDevice {
            inner,
            w: Arc::new(Mutex::new(w)),
            stamp,
        }
    }
}

impl Device for PcapDevice {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>> {
        let PcapDevice { inner, w, stamp } = *self;
        inner
            .into_queues()
            .into_iter()
            .map(|q| {
                Box::new(PcapQueue {
                    inner: q,
                    w: w.clone(),
                    stamp,
                    errors: 0,
                }) as Box<dyn Queue>
            })
            .collect()
    }
}

struct PcapQueue {
    inner: Box<dyn Queue>,
    w: Arc<Mutex<PcapWriter>>,
    stamp: Stamp,
    /// Frames that could not be recorded (disk full and the like).
    errors: u64,
}

impl PcapQueue {
    fn record(&mut self, now: Instant, pkts: &[Mbuf]) {
        if pkts.is_empty() {
            return;
        }
        let t = match self.stamp {
            Stamp::Now => now,
            Stamp::Wall => {
                let d = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                Instant::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            }
        };
        let mut w = self.w.lock().unwrap_or_else(|e| e.into_inner());
        for m in pkts {
            if w.write_mbuf(t, m).is_err() {
                self.errors += 1;
            }
        }
        if w.flush().is_err() {
            self.errors += 1;
        }
    }
}

impl Queue for PcapQueue {
    fn rx_burst(&mut self, now: Instant, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.rx_burst(now, out, max);
        self.record(now, &out[start..]);
        n
    }
    fn tx_burst(&mut self, now: Instant, pkts: &mut Vec<Mbuf>) -> usize {
        self.record(now, pkts);
        self.inner.tx_burst(now, pkts)
    }
    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }
    fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.fd()
    }
    fn stats(&self) -> QueueStats {
        let mut s = self.inner.stats();
        s.oerrors += self.errors;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_file_is_private_and_never_written_through_a_link() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("mpstack-pcap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        // New: 0600.
        let new = dir.join("new.pcap");
        PcapWriter::create(&new).unwrap();
        assert_eq!(mode(&new), 0o600);
        // A symbolic link, dangling or not, is refused and its target untouched.
        let target = dir.join("target");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.join("link.pcap");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = PcapWriter::create(&link).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        let dangling = dir.join("dangling.pcap");
        std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).unwrap();
        assert!(PcapWriter::create(&dangling).is_err());
        assert!(!dir.join("nowhere").exists());
        // A hard link to another file: refused.
        let hard = dir.join("hard.pcap");
        std::fs::hard_link(&target, &hard).unwrap();
        let e = PcapWriter::create(&hard).unwrap_err().to_string();
        assert!(e.contains("hard links"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        // A file of ours, readable by all: truncated and made 0600.
        let old = dir.join("old.pcap");
        std::fs::write(&old, vec![7u8; 1000]).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        PcapWriter::create(&old).unwrap();
        assert_eq!(mode(&old), 0o600);
        assert_eq!(std::fs::metadata(&old).unwrap().len(), 24);
        // Not a regular file: refused at once (a FIFO with no reader does not hang).
        assert!(PcapWriter::create(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn file_layout_is_pcap_ns() {
        let sink = Sink::default();
        let mut w = PcapWriter::new(Box::new(sink.clone())).unwrap();
        w.write_frame(Instant::from_nanos(3_000_000_007), &[1, 2, 3])
            .unwrap();
        let m = Mbuf::from_parts(&[&[4, 5], &[6]]).unwrap();
        w.write_mbuf(Instant::ZERO, &m).unwrap();
        let b = sink.0.lock().unwrap().clone();
        assert_eq!(&b[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 1);
        assert_eq!(
            u32::from_le_bytes(b[24..28].try_into().unwrap()),
            3,
            "seconds"
        );
        assert_eq!(
            u32::from_le_bytes(b[28..32].try_into().unwrap()),
            7,
            "nanoseconds"
        );
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 3);
        assert_eq!(&b[40..43], &[1, 2, 3]);
        assert_eq!(&b[43 + 16..43 + 19], &[4, 5, 6]);
        assert_eq!(b.len(), 24 + 16 + 3 + 16 + 3);
    }

    #[test]
    fn device_middleware_records_both_directions() {
        let (a, b) = crate::mem::wire(crate::mem::WireConfig::default());
        let sink = Sink::default();
        let w = PcapWriter::new(Box::new(sink.clone())).unwrap();
        let dev = PcapDevice::with_stamp(Box::new(a), w, Stamp::Now);
        let mut qa = Box::new(dev).into_queues().remove(0);
        let mut qb = Box::new(b).into_queues().remove(0);
        let mut f = vec![0u8; 60];
        f[12] = 0x88;
        f[13] = 0xb5;
        qa.tx_burst(Instant::ZERO, &mut vec![Mbuf::from_slice(&f).unwrap()]);
        let mut got = Vec::new();
        assert_eq!(qb.rx_burst(Instant::ZERO, &mut got, 4), 1);
        qb.tx_burst(Instant::ZERO, &mut got);
        let mut got = Vec::new();
        assert_eq!(qa.rx_burst(Instant::ZERO, &mut got, 4), 1);
        let b = sink.0.lock().unwrap().clone();
        assert_eq!(b.len(), 24 + 2 * (16 + 60));
    }
}
