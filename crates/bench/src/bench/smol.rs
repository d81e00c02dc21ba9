//! The smoltcp 0.14 baseline of `mpstack bench tcp`: two smoltcp `Interface`s in one
//! thread, each on its own in-memory Ethernet device, joined back to back by frame
//! queues; one TCP connection carries the same workload as the mpstack row (N MiB from
//! client to server, written from a 256 KiB chunk, read into a 256 KiB buffer).
//!
//! Owns the two [`Port`]s and the poll loop; calls only smoltcp. Everything is tuned the
//! way a smoltcp application that wants throughput would be, so the baseline is smoltcp
//! at its best and not a strawman: MTU 1500 like ours, checksums computed and verified
//! in software like ours (the memory wire offloads nothing), 256 KiB socket buffers
//! like mpstack's default sndbuf/rcvbuf, no allocation per frame (buffers circulate
//! between the ports), busy polling without `poll_delay` sleeps since both ends live in
//! the same thread and always have work. Two differences stay, both smoltcp's defaults
//! and both in its favour: no TCP timestamps (1460-byte segments where mpstack sends
//! 1448) and no congestion control (the whole 256 KiB window goes out at once).

use super::Measurement;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};
use std::collections::VecDeque;

/// Ethernet payload size, the same as the mpstack memory wire's.
pub const MTU: usize = 1500;
/// The largest MTU smoltcp takes (its loopback device's), for the `smoltcp-64k` row:
/// what smoltcp does with large frames, beside mpstack's segmentation offload.
pub const MTU_64K: usize = 65_535 - 14;
/// Frame buffer size at [`MTU`]: MTU plus the 14-byte Ethernet header.
#[cfg(test)]
const FRAME: usize = MTU + 14;
/// Frames a port's transmit queue holds before `transmit` says "no room"; the mpstack
/// row's memory wire uses the same limit.
const QUEUE_LIMIT: usize = 4096;
/// Socket buffer size on each side, mpstack's default sndbuf/rcvbuf.
const SOCKET_BUFFER: usize = 256 * 1024;
/// Size of each application write and read, as in the mpstack row's `pump`/`drain`.
const CHUNK: usize = 256 * 1024;
const SERVER_PORT: u16 = 5001;
const CLIENT_PORT: u16 = 49152;

/// A frame on the wire: a full-size buffer and the length in use, so that a buffer is
/// neither reallocated nor zeroed when it is reused.
#[derive(Debug)]
struct Frame {
    buf: Vec<u8>,
    len: usize,
}

/// One end of the in-memory link: an Ethernet `phy::Device`.
///
/// Buffers circulate: the sender takes one from `free`, fills it and queues it on `tx`;
/// [`link`] moves it to the peer's `rx`; the peer reads it and puts it on its `spent`;
/// [`link`] hands spent buffers back to the sender's `free`. After the first window no
/// frame is allocated.
#[derive(Debug, Default)]
pub struct Port {
    /// Largest frame: the MTU plus the Ethernet header.
    frame: usize,
    /// Checksums computed and verified (false: smoltcp's `ChecksumCapabilities::
    /// ignored()`, what it does over a device that offloads them).
    checksums: bool,
    rx: VecDeque<Frame>,
    tx: VecDeque<Frame>,
    free: Vec<Vec<u8>>,
    spent: Vec<Vec<u8>>,
    sent: Sent,
}

/// What a port has transmitted, so that tests can show the MTU was kept.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sent {
    pub frames: u64,
    pub largest: usize,
}

/// Moves the frames each port sent to the other's receive queue and returns the
/// buffers each port has read to the other, which sends into them next.
pub fn link(a: &mut Port, b: &mut Port) {
    b.rx.extend(a.tx.drain(..));
    a.rx.extend(b.tx.drain(..));
    a.free.append(&mut b.spent);
    b.free.append(&mut a.spent);
}

impl Port {
    pub fn new(mtu: usize, checksums: bool) -> Port {
        Port {
            frame: mtu + 14,
            checksums,
            ..Port::default()
        }
    }
}

impl Device for Port {
    type RxToken<'a> = RxToken<'a>;
    type TxToken<'a> = TxToken<'a>;

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.frame;
        if !self.checksums {
            caps.checksum = smoltcp::phy::ChecksumCapabilities::ignored();
        }
        caps
    }

    fn receive(&mut self, _now: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        let frame = self.rx.pop_front()?;
        Some((
            RxToken {
                frame,
                spent: &mut self.spent,
            },
            TxToken {
                frame: self.frame,
                tx: &mut self.tx,
                free: &mut self.free,
                sent: &mut self.sent,
            },
        ))
    }

    fn transmit(&mut self, _now: Instant) -> Option<TxToken<'_>> {
        if self.tx.len() >= QUEUE_LIMIT {
            return None;
        }
        Some(TxToken {
            frame: self.frame,
            tx: &mut self.tx,
            free: &mut self.free,
            sent: &mut self.sent,
        })
    }
}

#[derive(Debug)]
pub struct RxToken<'a> {
    frame: Frame,
    spent: &'a mut Vec<Vec<u8>>,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let r = f(&self.frame.buf[..self.frame.len]);
        self.spent.push(self.frame.buf);
        r
    }
}

#[derive(Debug)]
pub struct TxToken<'a> {
    frame: usize,
    tx: &'a mut VecDeque<Frame>,
    free: &'a mut Vec<Vec<u8>>,
    sent: &'a mut Sent,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = self.free.pop().unwrap_or_else(|| vec![0; self.frame]);
        if buf.len() < len {
            // Only if smoltcp ever asks for more than the MTU it was given.
            buf.resize(len, 0);
        }
        let r = f(&mut buf[..len]);
        self.sent.frames += 1;
        self.sent.largest = self.sent.largest.max(len);
        self.tx.push_back(Frame { buf, len });
        r
    }
}

/// One smoltcp host: interface, device and socket set.
struct Host {
    iface: Interface,
    port: Port,
    sockets: SocketSet<'static>,
    tcp: SocketHandle,
}

impl Host {
    fn new(mac: u8, addr: Ipv4Address, seed: u64, mtu: usize, checksums: bool) -> Host {
        let mut port = Port::new(mtu, checksums);
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress([
            0x02, 0, 0, 0, 0, mac,
        ])));
        config.random_seed = seed;
        let mut iface = Interface::new(config, &mut port, Instant::now());
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(addr), 24))
                .expect("one address fits");
        });
        // Nagle kept: without it the MTU 1500 row was slower (28.7 vs 31.8 Gbit/s,
        // more short segments at the ends of writes). The 10 ms delayed ACK is off.
        // smoltcp acks at once only when more than one MSS is unacked (Linux's rule,
        // `immediate_ack_to_transmit`), and the first flight is one segment: the
        // SYN's window is not scaled, so it holds 64 KiB, one segment at MTU 65521.
        // With the delay, that segment's ACK waited 10 ms, and the smoltcp-64k row
        // took 19.7 ms for 64 MiB (10.2 ms before its first 4 MiB arrived) and 47 ms
        // for 256 MiB. Without it: 9.8 ms and 37.6 ms, the same 57 Gbit/s as in a
        // 4 GiB transfer. The MTU 1500 row is the same either way (17.1 ms, 67.5 ms).
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; SOCKET_BUFFER]),
            tcp::SocketBuffer::new(vec![0; SOCKET_BUFFER]),
        );
        socket.set_ack_delay(None);
        let mut sockets = SocketSet::new(Vec::new());
        let tcp = sockets.add(socket);
        Host {
            iface,
            port,
            sockets,
            tcp,
        }
    }

    fn poll(&mut self, now: Instant) {
        self.iface.poll(now, &mut self.port, &mut self.sockets);
    }

    fn socket(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket<'static>>(self.tcp)
    }
}

/// Period of the byte pattern written: a prime, so that a segment lost, repeated or
/// reordered by a multiple of any power-of-two size shows up in [`run`]'s check.
const PATTERN: usize = 251;

/// Sends `bytes` bytes over one smoltcp TCP connection between two interfaces in this
/// thread and times it from the first write until the server has read every byte and
/// seen the FIN.
/// Without `checksums`, smoltcp neither computes nor verifies them, as over a device
/// with checksum offload (the `smoltcp-64k-nocsum` row, beside `mpstack-polled-tso`).
pub fn transfer(bytes: u64, mtu: usize, checksums: bool) -> Result<Measurement, String> {
    run(bytes, false, mtu, checksums).map(|(m, _)| m)
}

/// [`transfer`], and with `verify` the receiver also compares every byte with the
/// pattern written (tests only: the comparison would be timed too). Also returns what
/// the client's port sent.
fn run(
    bytes: u64,
    verify: bool,
    mtu: usize,
    checksums: bool,
) -> Result<(Measurement, Sent), String> {
    let a_addr = Ipv4Address::new(198, 18, 0, 1);
    let b_addr = Ipv4Address::new(198, 18, 0, 2);
    let mut a = Host::new(1, a_addr, 0x6d70_7374_6163_6b01, mtu, checksums);
    let mut b = Host::new(2, b_addr, 0x6d70_7374_6163_6b02, mtu, checksums);
    b.socket()
        .listen(SERVER_PORT)
        .map_err(|e| format!("smoltcp listen: {e}"))?;
    let cx = a.iface.context();
    a.sockets
        .get_mut::<tcp::Socket<'static>>(a.tcp)
        .connect(cx, (IpAddress::Ipv4(b_addr), SERVER_PORT), CLIENT_PORT)
        .map_err(|e| format!("smoltcp connect: {e}"))?;

    let chunk: Vec<u8> = (0..CHUNK + PATTERN).map(|i| (i % PATTERN) as u8).collect();
    let mut sink = vec![0u8; CHUNK];
    let (mut sent, mut got) = (0u64, 0u64);
    let mut closed = false;
    let mut t0: Option<std::time::Instant> = None;
    let started = std::time::Instant::now();
    // Generous: smoltcp moves more than 100 MB/s on any machine this runs on.
    let limit = std::time::Duration::from_secs(30 + bytes / (10 << 20));
    loop {
        let now = Instant::now();
        a.poll(now);
        link(&mut a.port, &mut b.port);
        b.poll(now);
        link(&mut a.port, &mut b.port);

        let c = a.socket();
        while sent < bytes && c.can_send() {
            let n = ((bytes - sent) as usize).min(CHUNK);
            let at = (sent % PATTERN as u64) as usize;
            let w = c
                .send_slice(&chunk[at..at + n])
                .map_err(|e| format!("smoltcp send: {e}"))?;
            if w == 0 {
                break;
            }
            t0.get_or_insert_with(std::time::Instant::now);
            sent += w as u64;
        }
        if sent == bytes && !closed {
            c.close();
            closed = true;
        }

        let s = b.socket();
        while s.can_recv() {
            let n = s
                .recv_slice(&mut sink)
                .map_err(|e| format!("smoltcp recv: {e}"))?;
            if verify {
                let at = (got % PATTERN as u64) as usize;
                if let Some(i) = (0..n).find(|&i| sink[i] != chunk[at + i]) {
                    return Err(format!("smoltcp: wrong byte at offset {}", got + i as u64));
                }
            }
            got += n as u64;
        }
        // `may_recv` turns false once the FIN is in and the buffer is empty.
        if got >= bytes && !s.may_recv() && s.state() != tcp::State::Listen {
            break;
        }
        if started.elapsed() > limit {
            return Err(format!(
                "smoltcp: {got} of {bytes} bytes after {} s (client {}, server {})",
                limit.as_secs(),
                a.socket().state(),
                b.socket().state()
            ));
        }
    }
    let secs = t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
    if got != bytes {
        return Err(format!("smoltcp delivered {got} of {bytes} bytes"));
    }
    Ok((
        Measurement {
            name: "smoltcp",
            bytes,
            secs,
        },
        a.port.sent,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_mebibyte_arrives_byte_exact() {
        // Its buffers come and go: not while the idle test counts the heap.
        let _quiet = crate::bench::heap_quiet();
        let (m, sent) = run(1 << 20, true, MTU, true).unwrap();
        assert_eq!(m.bytes, 1 << 20);
        assert!(m.secs > 0.0 && m.gbps() > 0.0, "{} s", m.secs);
        // Full-sized frames of 14 + 20 + 20 + 1460 bytes (no TCP options on data
        // segments), and no fewer frames than that size allows.
        assert_eq!(sent.largest, FRAME);
        assert!(sent.frames >= (1 << 20) / 1460, "{sent:?}");
    }

    #[test]
    fn a_transfer_that_is_not_a_multiple_of_the_chunk_completes() {
        // Its buffers come and go: not while the idle test counts the heap.
        let _quiet = crate::bench::heap_quiet();
        // Odd size: the last segment is short and the FIN rides on or after it.
        let (m, _) = run(3 * CHUNK as u64 + 1234, true, MTU, true).unwrap();
        assert_eq!(m.bytes, 3 * CHUNK as u64 + 1234);
        // And with 64 KiB frames.
        let (m, sent) = run(3 * CHUNK as u64 + 1234, true, MTU_64K, true).unwrap();
        assert_eq!(m.bytes, 3 * CHUNK as u64 + 1234);
        assert!(sent.largest > 60_000, "{sent:?}");
        // And without checksums (the receiver still checks every byte).
        let (m, _) = run(3 * CHUNK as u64 + 1234, true, MTU_64K, false).unwrap();
        assert_eq!(m.bytes, 3 * CHUNK as u64 + 1234);
    }

    #[test]
    fn link_returns_buffers_to_the_sender() {
        // Its buffers come and go: not while the idle test counts the heap.
        let _quiet = crate::bench::heap_quiet();
        let mut a = Port::new(MTU, true);
        let mut b = Port::new(MTU, true);
        let tok = a.transmit(Instant::from_millis(0)).unwrap();
        phy::TxToken::consume(tok, 60, |buf| buf.fill(7));
        link(&mut a, &mut b);
        assert_eq!(b.rx.len(), 1);
        let (rx, _) = b.receive(Instant::from_millis(0)).unwrap();
        let seen = phy::RxToken::consume(rx, |buf| buf.to_vec());
        assert_eq!(seen, vec![7u8; 60]);
        link(&mut a, &mut b);
        assert_eq!(a.free.len(), 1, "the buffer went back to its sender");
        assert_eq!(a.free[0].len(), FRAME);
    }
}
