//! Packet buffers in the BSD tradition: a packet ([`Mbuf`]) is a packet header
//! ([`PktHdr`]) plus a short chain of segments, each a window into a
//! reference-counted pool buffer (a small buffer or a 2 KiB cluster).
//!
//! What it owns: the buffer [`pool`] (per-thread caches over a global free list),
//! the packet operations of `uipc_mbuf.c` (`M_PREPEND`, `m_adj`, `m_split`,
//! `m_cat`, `m_append`, `m_copydata`, `m_copyback`, `m_copypacket`) and the three
//! ways to make headers contiguous that the m_pulldown paper (Itojun, Freenix
//! 2000) compares: [`Mbuf::pulldown`] (KAME), [`Mbuf::pullup`] (4.4BSD) and
//! [`Mbuf::pullup2`] (NRL), with their [`stats`] counters so the paper's claim is
//! measured here, not believed.
//!
//! What it may call: `std`, and `libc` for one `madvise` ([`mem`]). This is one of the two crates allowed `unsafe`
//! (the pool, the inline segment list, and [`FillBuf`]'s writes past the pieces
//! it handed out); each block says why it is sound, and
//! the unit tests run under Miri.
//!
//! Protocol code reads headers as `m.pulldown(off, len)?` and then a `wire` view
//! over the returned slice: the slice is contiguous and writable, and nothing
//! before `off` was copied or moved, so earlier header offsets stay valid.
//!
//! Sizes follow NetBSD 1.4 as in the paper: a small buffer is [`MSIZE`] bytes
//! holding [`MLEN`] bytes of data; the first small buffer of a packet (as
//! `m_devget` and `m_pullup` make it) starts its data `MLEN - MHLEN` bytes in,
//! where 4.4BSD kept the packet header, so it holds [`MHLEN`].

use std::fmt;

pub mod csum;
mod fill;
mod mbuf;
pub mod mem;
#[cfg(test)]
mod model_tests;
pub mod pool;
mod pull;
mod seglist;
pub mod stats;
#[cfg(test)]
mod tests;

pub use crate::fill::FillBuf;
pub use crate::mbuf::{Mbuf, Pkt, Shares};
pub use crate::pool::{BufId, PoolStats};
pub use crate::stats::{MbufStats, PullStats};

/// Bytes of one small buffer, header included (NetBSD 1.4).
pub const MSIZE: usize = 128;
/// Data bytes in the first (packet-header) small buffer: `m_pullup`'s limit.
pub const MHLEN: usize = 96;
/// Data bytes in a following small buffer.
pub const MLEN: usize = 108;
/// Bytes of a cluster: `m_pullup2`'s limit and `m_pulldown`'s per-header limit.
pub const MCLBYTES: usize = 2048;
/// Bytes of a jumbo cluster: the largest IP packet (65,535 bytes) with a link
/// header and [`DEFAULT_HEADROOM`] in front, for segmentation offload
/// ([`Mbuf::with_capacity`]).
pub const MJUMBYTES: usize = 66 * 1024;
/// Bytes of a 256 KiB cluster (with [`DEFAULT_HEADROOM`] and more to spare): what
/// an application's large write goes into, so that a bulk transfer moves a quarter
/// of the buffers it would in jumbo clusters ([`Mbuf::with_capacity`]). FreeBSD's
/// largest is `MJUM16BYTES`; Linux's page frags for a socket go to 32 KiB.
pub const MJUM256BYTES: usize = 258 * 1024;
/// Headroom left by [`Mbuf::new`] and [`Mbuf::from_slice`] for prepends
/// (Ethernet + VLAN + IPv6 + a tunnel header fit).
pub const DEFAULT_HEADROOM: usize = 128;
/// Headroom [`Mbuf::with_headers`] keeps when it can: an Ethernet header and an
/// 802.1Q tag (a longer prepend takes a buffer of its own, as `M_PREPEND` does).
pub const LINK_HEADROOM: usize = 18;
/// Same as [`DEFAULT_HEADROOM`].
pub const MAX_HEADROOM: usize = DEFAULT_HEADROOM;

/// Offset of the data in a packet-header small buffer.
pub(crate) const MH_OFF: usize = MLEN - MHLEN;

/// No buffer available: the pool is at its limit (ENOBUFS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoBufs;

impl fmt::Display for NoBufs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no buffer space available (ENOBUFS)")
    }
}

impl std::error::Error for NoBufs {}

/// Why a pulldown/pullup/copydata failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullError {
    /// The region extends beyond the end of the packet.
    OutOfRange,
    /// The region is longer than the strategy can make contiguous
    /// (`MCLBYTES` for pulldown/pullup2, `MHLEN` for pullup).
    TooBig,
    /// A buffer was needed and the pool had none.
    NoBufs,
}

impl fmt::Display for PullError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PullError::OutOfRange => "region beyond the end of the packet",
            PullError::TooBig => "region longer than the strategy can make contiguous",
            PullError::NoBufs => "no buffer space available (ENOBUFS)",
        })
    }
}

impl std::error::Error for PullError {}

impl From<NoBufs> for PullError {
    fn from(_: NoBufs) -> PullError {
        PullError::NoBufs
    }
}

/// [`PktHdr::flags`]: received as link-layer broadcast.
pub const M_BCAST: u16 = 1 << 0;
/// [`PktHdr::flags`]: received as link-layer multicast.
pub const M_MCAST: u16 = 1 << 1;
/// [`PktHdr::flags`]: looped back by the stack (not from a wire).
pub const M_LOOP: u16 = 1 << 2;
/// [`PktHdr::flags`]: a fragment of a larger datagram.
pub const M_FRAG: u16 = 1 << 3;

/// [`PktHdr::csum_flags`]: receive offload verified the IPv4 header checksum.
pub const CSUM_IP_VALID: u32 = 1 << 0;
/// [`PktHdr::csum_flags`]: receive offload verified the TCP/UDP/ICMP checksum.
pub const CSUM_L4_VALID: u32 = 1 << 1;
/// [`PktHdr::csum_flags`]: the IPv4 header checksum must still be computed on output.
pub const CSUM_IP_NEEDED: u32 = 1 << 2;
/// [`PktHdr::csum_flags`]: the L4 checksum must still be computed on output.
pub const CSUM_L4_NEEDED: u32 = 1 << 3;
/// [`PktHdr::csum_flags`]: any checksum still to be computed on output.
pub const CSUM_NEEDED: u32 = CSUM_IP_NEEDED | CSUM_L4_NEEDED;

/// The packet header (`m_pkthdr`): metadata that travels with the packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PktHdr {
    /// Receiving interface index.
    pub rcvif: u16,
    /// Receiving device queue.
    pub rxq: u16,
    /// RSS (Toeplitz) hash of the flow, from the device or computed.
    pub rss_hash: u32,
    /// 802.1Q tag control information, when stripped by the device or `vlan_input`.
    pub vlan_tci: Option<u16>,
    /// `M_BCAST`, `M_MCAST`, `M_LOOP`, `M_FRAG`.
    pub flags: u16,
    /// `CSUM_*` offload state.
    pub csum_flags: u32,
    /// Firewall tag (ipfw `tag`), 0 if none.
    pub tag: u32,
    /// For a TCP segment longer than the MTU sent to a device with segmentation
    /// offload: data bytes per segment it is to be cut into (Linux's `gso_size`).
    pub tso_segsz: u16,
}
