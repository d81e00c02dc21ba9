//! `bench router`'s `v4-connected` row: 1,024 hosts on a /16 connected to out1,
//! their neighbour entries static, beside the four routes of `v4-few`.

use super::frames::{few4, frame4, if_mac, table4, Table4};
use super::Row;
use net::iface::InetAddr;
use net::Stack;
use route::Prefix4;
use std::net::Ipv4Addr;
use wire::EthernetAddress;

/// `v4-connected`'s subnet, on out1: 198.19.0.0/16, the router 198.19.0.1.
pub(super) const CONNECTED_NET: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 0);
/// Hosts of `v4-connected` (the neighbour table's default bound, 1,024).
pub(super) const CONNECTED_HOSTS: u32 = 1024;
/// The oracle's value for a destination on the connected subnet.
pub(super) const CONNECTED: u32 = u32::MAX - 1;
/// Host `k` of the connected subnet (198.19.0.2 onwards, spread over the /16).
fn connected_host(k: u32) -> u32 {
    u32::from(CONNECTED_NET) | ((k * 61 + 2) % 0xfffe).max(2)
}
/// The MAC of a host on the connected subnet, from its address.
pub(super) fn connected_mac(a: u32) -> EthernetAddress {
    let b = a.to_be_bytes();
    EthernetAddress([0x02, 0x00, 0x5f, b[1], b[2], b[3]])
}

/// `v4-connected`'s subnet on out1, and its hosts' neighbour entries.
pub(super) fn connect(stack: &Stack) -> Result<(), String> {
    let out1 = stack.config().ifaces[1].index;
    let a = InetAddr::new(Ipv4Addr::from(u32::from(CONNECTED_NET) | 1), 16);
    stack
        .add_address(out1, a)
        .map_err(|e| format!("bench router: v4-connected: {e}"))?;
    let cfg = stack.config();
    for k in 0..CONNECTED_HOSTS {
        let h = connected_host(k);
        cfg.ifaces[1]
            .arp
            .insert_static(Ipv4Addr::from(h), connected_mac(h));
    }
    Ok(())
}

/// The oracle (the four routes and the connected /16) and the frames, `flows` of
/// them over the hosts.
pub(super) fn table_and_frames(flows: usize) -> (Table4, Vec<Vec<u8>>) {
    let mut t = table4(&few4());
    t.oracle
        .insert(Prefix4::new(u32::from(CONNECTED_NET), 16), CONNECTED);
    let frames = (0..flows as u32)
        .map(|i| frame4(connected_host(i % CONNECTED_HOSTS), i as usize))
        .collect();
    (t, frames)
}

/// A forwarded frame to a connected host: to its MAC, from out1's, TTL 63.
pub(super) fn check_frame(eth: &wire::EthernetFrame<&[u8]>, ttl: u8) -> Result<(), String> {
    let ip = wire::Ipv4Packet::new_checked(eth.payload()).map_err(|e| format!("{e}"))?;
    let want = connected_mac(u32::from(ip.dst_addr()));
    if eth.dst_addr() != want || eth.src_addr() != if_mac(1) || ttl != 63 {
        return Err(format!(
            "a frame to {} (want {want}) from {}, TTL {ttl}, for a connected host",
            eth.dst_addr(),
            eth.src_addr()
        ));
    }
    Ok(())
}

/// The row's ratio to `v4-few`, printed under the table.
pub(super) fn summary(c: Option<&Row>, f: Option<&Row>) {
    if let (Some(c), Some(f)) = (c, f) {
        println!(
            "v4-connected, 1 worker: {:.2}x v4-few per core (to hosts on a connected subnet vs through gateways)",
            c.core_mpps / f.core_mpps.max(1e-9)
        );
    }
}
