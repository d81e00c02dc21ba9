//! Devices: where packets enter and leave mpstack.
//!
//! A [`Device`] is a named link with one or more queue pairs. A worker takes the
//! queues it owns with [`Device::into_queues`] and from then on talks only to its
//! [`Queue`]s, in bursts: `rx_burst` fills a batch of [`Mbuf`]s, `tx_burst` drains one.
//! Nothing here knows about protocols except RSS, which reads addresses and ports to
//! steer a flow to one queue (the way a NIC does).
//!
//! Time is passed in: a device never reads the clock itself, so the same memory wire
//! runs in real time on worker threads and in virtual time in `sim`.
//!
//! This crate and `mbuf` are the only ones allowed `unsafe` (TAP ioctls, packet
//! sockets and their rings, poll, peer credentials).

pub mod alloc_count;
pub mod cpu;
pub mod file;
pub mod gen;
pub mod heap;
pub mod impair;
pub mod mem;
pub mod netns;
pub mod packet;
pub mod packetdrill;
pub mod pcap;
pub mod poll;
pub mod rng;
pub mod rss;
pub mod signal;
pub mod tap;
pub mod time;
pub mod unix;

pub use mbuf::Mbuf;
pub use time::{Duration, Instant};

use std::os::fd::RawFd;

/// Counters of one queue (per direction), in the style of `netstat -i`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub ipackets: u64,
    pub ibytes: u64,
    pub ierrors: u64,
    pub opackets: u64,
    pub obytes: u64,
    pub oerrors: u64,
    /// Frames dropped by the device: queue full, impairment loss, no buffers.
    pub odrops: u64,
    pub idrops: u64,
}

impl std::ops::AddAssign for QueueStats {
    fn add_assign(&mut self, o: Self) {
        self.ipackets += o.ipackets;
        self.ibytes += o.ibytes;
        self.ierrors += o.ierrors;
        self.opackets += o.opackets;
        self.obytes += o.obytes;
        self.oerrors += o.oerrors;
        self.odrops += o.odrops;
        self.idrops += o.idrops;
    }
}

/// One receive/transmit queue pair of a device, owned by exactly one worker.
///
/// Call order: `rx_burst` and `tx_burst` in any order, as often as wanted; `poll_at`
/// says when a frame in flight becomes receivable (memory wires with delay), `fd`
/// gives a file descriptor that becomes readable when frames arrive (real devices),
/// so a worker can sleep in `poll(2)` until either.
pub trait Queue: Send {
    /// Receives up to `max` frames, appending them to `out`. Returns how many were added.
    /// Never blocks.
    fn rx_burst(&mut self, now: Instant, out: &mut Vec<Mbuf>, max: usize) -> usize;
    /// Transmits the frames in `pkts`, draining it. Frames the device cannot take are
    /// dropped and counted in `odrops`. Returns how many were accepted. Never blocks.
    fn tx_burst(&mut self, now: Instant, pkts: &mut Vec<Mbuf>) -> usize;
    /// The earliest time at which `rx_burst` will have a frame that it has not now,
    /// for devices that know (memory wires); `None` otherwise.
    fn poll_at(&self) -> Option<Instant> {
        None
    }
    /// A descriptor that is readable when frames wait (real devices); `None` otherwise.
    fn fd(&self) -> Option<RawFd> {
        None
    }
    /// Counters of this queue.
    fn stats(&self) -> QueueStats;
}

/// What a device is, before its queues are handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    /// Largest L3 packet (excluding the 14-byte Ethernet header).
    pub mtu: usize,
    pub num_queues: usize,
    /// The link-layer address the device suggests for the stack side, if any.
    pub hw_addr: Option<[u8; 6]>,
    /// What the device does for the stack (checksums, segmentation).
    pub offload: Offloads,
}

/// Work a device takes off the stack, as a NIC or virtio-net advertises it.
///
/// - `csum`: transmit: the device fills in the TCP checksum of a packet marked
///   `mbuf::CSUM_L4_NEEDED` (whose checksum field holds the pseudo-header sum, as
///   Linux's `CHECKSUM_PARTIAL`); receive: it marks the packets it has checked
///   `mbuf::CSUM_L4_VALID`, and passes on `CSUM_L4_NEEDED` for those still unfilled
///   (virtio's `DATA_VALID` and `NEEDS_CSUM`), so a router can fill them before a
///   device that cannot.
/// - `tso`: the largest IP packet the device takes and cuts into MTU-sized TCP
///   segments itself (TCP segmentation offload); 0 for none. A receiver on the same
///   kind of link gets the packet whole, as from large receive offload. Over 65,535
///   (a memory link's choice; [`Offloads::BIG`]) a TCP segment is longer than an IP
///   header can say, and goes with its length field 0 as Linux's BIG TCP does; only
///   a receiver that sees it whole from such a device takes that 0 to mean "all of
///   it".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    pub csum: bool,
    pub tso: usize,
}

impl Offloads {
    /// Checksum and segmentation offload up to the largest IP packet (65,535).
    pub const ALL: Offloads = Offloads {
        csum: true,
        tso: 65_535,
    };

    /// Checksum and segmentation offload up to 512 KiB, beyond what an IP header
    /// can say: eight times fewer packets for a bulk transfer between stacks on a
    /// memory link than [`Offloads::ALL`] (Linux's BIG TCP, whose `gso_max_size`
    /// goes to 512 KiB too). The socket buffers must hold two such segments to keep
    /// them flowing: 1 MiB.
    pub const BIG: Offloads = Offloads {
        csum: true,
        tso: 512 * 1024,
    };
}

/// A link with one or more queue pairs.
pub trait Device: Send {
    fn info(&self) -> DeviceInfo;
    /// Hands out the queue pairs, one per worker that will own it.
    fn into_queues(self: Box<Self>) -> Vec<Box<dyn Queue>>;
}
