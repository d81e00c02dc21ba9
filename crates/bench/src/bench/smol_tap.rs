//! The smoltcp partner of the `tap-in` and `tap-out` rows: smoltcp 0.14 on its own
//! TAP (`phy::TunTapInterface`, MTU 1500; it has no offload), its TCP socket with the
//! same 256 KiB buffers as the memory-wire row, polled in one thread that sleeps in
//! `phy::wait` for the interface's poll delay (as smoltcp's examples run it, so that
//! the Linux peer and the kernel get the CPU). The TAP goes into a namespace of its
//! own with Linux's end a thread of this process inside it, as for mpstack's rows.
//!
//! Owns the namespace `mpb-s-<pid>`; deletes it when its [`SmolTapLab`] is dropped.
//! Only 198.18.4.1/24 (Linux) and 198.18.4.2/24 (smoltcp).

use super::tap::{joined, measured, TapRows};
use super::veth::Netns;
use super::Measurement;
use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::phy::{self, Medium, TunTapInterface};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration as SDuration, Instant as SInstant};
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr, Ipv4Address};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const LINUX_ADDR: &str = "198.18.4.1/24";
const LINUX_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 4, 1);
const OUR_IP: Ipv4Address = Ipv4Address::new(198, 18, 4, 2);
const PORT: u16 = 5001;
const SOCKET_BUFFER: usize = 256 * 1024;
const CHUNK: usize = 256 * 1024;

/// A namespace holding smoltcp's TAP; dropping it deletes the namespace.
pub struct SmolTapLab {
    ns: Netns,
    tap: String,
}

impl SmolTapLab {
    pub fn new() -> Result<SmolTapLab, String> {
        let pid = std::process::id();
        Ok(SmolTapLab {
            ns: Netns::new(format!("mpb-s-{pid}"))?,
            tap: format!("mpbs{}", pid % 100_000),
        })
    }

    /// smoltcp's interface on a new TAP, the TAP moved into the namespace and
    /// configured there. A new one per measurement: the TAP goes when it is dropped.
    fn interface(&self) -> Result<(TunTapInterface, Interface, SocketSet<'static>), String> {
        let mut dev = TunTapInterface::new(&self.tap, Medium::Ethernet)
            .map_err(|e| format!("smoltcp TAP {}: {e}", self.tap))?;
        self.ns.adopt(&self.tap, LINUX_ADDR)?;
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress([
            0x02, 0, 0, 0, 0, 4,
        ])));
        config.random_seed = 0x6d70_7374_6163_6b04;
        let mut iface = Interface::new(config, &mut dev, SInstant::now());
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(OUR_IP), 24))
                .expect("one address fits");
        });
        let mut sockets = SocketSet::new(Vec::new());
        sockets.add(tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; SOCKET_BUFFER]),
            tcp::SocketBuffer::new(vec![0; SOCKET_BUFFER]),
        ));
        Ok((dev, iface, sockets))
    }
}

impl TapRows for SmolTapLab {
    /// Linux → smoltcp.
    fn inbound(&self, bytes: u64) -> Result<Measurement, String> {
        let (mut dev, mut iface, mut sockets) = self.interface()?;
        let h = sockets.iter().next().map(|(h, _)| h).ok_or("no socket")?;
        sockets
            .get_mut::<tcp::Socket<'static>>(h)
            .listen(PORT)
            .map_err(|e| format!("smoltcp listen: {e}"))?;
        let to = SocketAddrV4::new(Ipv4Addr::from(OUR_IP.octets()), PORT);
        let sender = self.ns.sender(to, bytes);
        let mut sink = vec![0u8; CHUNK];
        let mut got = 0u64;
        let limit = Instant::now() + Duration::from_secs(30 + bytes / (10 << 20));
        loop {
            let now = SInstant::now();
            iface.poll(now, &mut dev, &mut sockets);
            let s = sockets.get_mut::<tcp::Socket<'static>>(h);
            while s.can_recv() {
                got += s
                    .recv_slice(&mut sink)
                    .map_err(|e| format!("smoltcp recv: {e}"))? as u64;
            }
            if got >= bytes && !s.may_recv() && s.state() != tcp::State::Listen {
                break;
            }
            if Instant::now() > limit {
                return Err(format!(
                    "smoltcp-tap-in: {got} of {bytes} bytes, {}",
                    s.state()
                ));
            }
            sleep(&mut iface, &sockets, &dev);
        }
        let end = Instant::now();
        let t0 = joined(sender, "Linux sender")?;
        measured("smoltcp-tap-in", "smoltcp", got, bytes, t0, end)
    }

    /// smoltcp → Linux.
    fn outbound(&self, bytes: u64) -> Result<Measurement, String> {
        let (mut dev, mut iface, mut sockets) = self.interface()?;
        let h = sockets.iter().next().map(|(h, _)| h).ok_or("no socket")?;
        let receiver = self.ns.receiver(SocketAddrV4::new(LINUX_IP, PORT))?;
        let cx = iface.context();
        sockets
            .get_mut::<tcp::Socket<'static>>(h)
            .connect(
                cx,
                (IpAddress::Ipv4(Ipv4Address::from(LINUX_IP.octets())), PORT),
                49152,
            )
            .map_err(|e| format!("smoltcp connect: {e}"))?;
        let chunk = vec![0x5au8; CHUNK];
        let mut sent = 0u64;
        let mut t0 = None;
        let mut closed = false;
        let limit = Instant::now() + Duration::from_secs(30 + bytes / (10 << 20));
        while !receiver.is_finished() {
            let now = SInstant::now();
            iface.poll(now, &mut dev, &mut sockets);
            let s = sockets.get_mut::<tcp::Socket<'static>>(h);
            while sent < bytes && s.can_send() {
                let n = ((bytes - sent) as usize).min(CHUNK);
                let w = s
                    .send_slice(&chunk[..n])
                    .map_err(|e| format!("smoltcp send: {e}"))?;
                if w == 0 {
                    break;
                }
                t0.get_or_insert_with(Instant::now);
                sent += w as u64;
            }
            if sent == bytes && !closed {
                s.close();
                closed = true;
            }
            if Instant::now() > limit {
                return Err(format!(
                    "smoltcp-tap-out: {sent} of {bytes} bytes sent, {}",
                    s.state()
                ));
            }
            sleep(&mut iface, &sockets, &dev);
        }
        let (got, end) = joined(receiver, "Linux receiver")?;
        let t0 = t0.ok_or("smoltcp-tap-out: nothing sent")?;
        measured("smoltcp-tap-out", "Linux", got, bytes, t0, end)
    }
}

/// Sleeps in `phy::wait` until the device has a frame or smoltcp's poll delay (at
/// most 1 ms) is up, as smoltcp's examples do.
fn sleep(iface: &mut Interface, sockets: &SocketSet<'_>, dev: &TunTapInterface) {
    let delay = iface
        .poll_delay(SInstant::now(), sockets)
        .map(|d| d.min(SDuration::from_millis(1)));
    let _ = phy::wait(dev.as_raw_fd(), delay);
}
