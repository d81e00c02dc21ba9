//! Two hosts on a hub, and the IPv6 frames a raw port on it writes.

use dev::mem::WireConfig;
use sim::{HostId, HubId, Sim};
use std::net::Ipv6Addr;
use wire::{
    EtherType, EthernetAddress, EthernetFrame, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Packet,
    Ipv6Repr,
};

/// Hosts `a` (198.18.0.1) and `b` (198.18.0.2) on one hub with `wire`, each with
/// `workers` workers and the TCP settings `tcp`; and the hub (for a raw port on it).
pub fn pair_on_hub(
    workers: usize,
    seed: u64,
    wire: WireConfig,
    tcp: net::tcp::TcpConfig,
) -> (Sim, HostId, HostId, HubId) {
    let mut s = Sim::new(seed);
    let hub = s.add_hub(wire);
    let (a, b) = (
        s.add_host_tcp("a", workers, tcp),
        s.add_host_tcp("b", workers, tcp),
    );
    s.connect(a, hub, "198.18.0.1/24");
    s.connect(b, hub, "198.18.0.2/24");
    (s, a, b, hub)
}

/// [`pair_on_hub`] with the default wire and TCP settings.
pub fn pair(workers: usize, seed: u64) -> (Sim, HostId, HostId, HubId) {
    pair_on_hub(workers, seed, WireConfig::default(), Default::default())
}

/// Gives `a` 2001:2::1/64 and `b` 2001:2::2/64 on their first interfaces
/// (tentative: duplicate address detection is the caller's to wait for).
pub fn add_addresses6(s: &mut Sim, a: HostId, b: HostId) {
    for (h, addr) in [(a, "2001:2::1/64"), (b, "2001:2::2/64")] {
        s.host(h)
            .add_address6(net::iface::IfIndex(0), addr.parse().unwrap())
            .unwrap();
    }
}

/// An Ethernet frame from MAC `from` to MAC `to` holding an IPv6 packet from `src`
/// to `dst` with hop limit `hlim`: `ext`, a raw extension-header chain whose first
/// header is `first` (none when empty), then the ICMPv6 message `icmp`.
#[allow(clippy::too_many_arguments)]
pub fn icmp6_frame(
    to: EthernetAddress,
    from: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hlim: u8,
    first: IpProtocol,
    ext: &[u8],
    icmp: &Icmpv6Repr<'_>,
) -> mbuf::Mbuf {
    let ilen = icmp.buffer_len();
    let mut icmp_bytes = vec![0u8; ilen];
    icmp.emit(
        &mut Icmpv6Packet::new_unchecked(&mut icmp_bytes[..]),
        &src,
        &dst,
    );
    let mut v = vec![0u8; 14 + 40];
    {
        let mut f = EthernetFrame::new_unchecked(&mut v[..]);
        f.set_dst_addr(to);
        f.set_src_addr(from);
        f.set_ethertype(EtherType::Ipv6);
    }
    Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: if ext.is_empty() {
            IpProtocol::Icmpv6
        } else {
            first
        },
        payload_len: ext.len() + ilen,
        hop_limit: hlim,
    }
    .emit(&mut Ipv6Packet::new_unchecked(&mut v[14..]));
    v.extend_from_slice(ext);
    v.extend_from_slice(&icmp_bytes);
    mbuf::Mbuf::from_slice(&v).unwrap()
}
