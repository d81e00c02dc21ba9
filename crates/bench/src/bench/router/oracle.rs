//! `bench router`'s check before timing: forwarded frames against a radix-tree
//! oracle built from the same routes.

use super::connected::{check_frame, CONNECTED};
use super::frames::{gw_ifindex, gw_mac, if_mac};
use route::{Lookup, Radix};
use wire::{EtherType, EthernetFrame};

/// Checks forwarded frames against the oracles: the gateway's MAC on the way out,
/// TTL/hop limit 63, a valid IPv4 header checksum. Returns the first problem.
pub(super) fn check(
    frames: &[Vec<u8>],
    t4: &Radix<u32>,
    t6: &Radix<u128>,
) -> Result<usize, String> {
    let mut n = 0;
    for f in frames {
        let Ok(eth) = EthernetFrame::new_checked(&f[..]) else {
            return Err(format!("a runt frame of {} bytes", f.len()));
        };
        let p = eth.payload();
        let (g, ttl) = match eth.ethertype() {
            EtherType::Ipv4 => {
                let ip = wire::Ipv4Packet::new_checked(p).map_err(|e| format!("{e}"))?;
                if wire::checksum::data(&p[..20]) != 0xffff {
                    return Err("an IPv4 header checksum is wrong".into());
                }
                let dst = u32::from(ip.dst_addr());
                (t4.lookup(dst), ip.hop_limit())
            }
            EtherType::Ipv6 => {
                if p.len() < 40 || p[0] >> 4 != 6 {
                    return Err("a malformed IPv6 header".into());
                }
                let mut d = [0u8; 16];
                d.copy_from_slice(&p[24..40]);
                // ND and MLD of the stack's own addresses are not forwarded frames.
                if p[6] == 58 {
                    continue;
                }
                (t6.lookup(u128::from_be_bytes(d)), p[7])
            }
            // The stack's own ARP or ND traffic.
            _ => continue,
        };
        let Some(g) = g else {
            return Err("a frame forwarded to a destination with no route".into());
        };
        if g == CONNECTED {
            check_frame(&eth, ttl)?;
            n += 1;
            continue;
        }
        if eth.dst_addr() != gw_mac(g) {
            return Err(format!(
                "a frame to {} where the route says {} (gateway {g})",
                eth.dst_addr(),
                gw_mac(g)
            ));
        }
        if eth.src_addr() != if_mac(gw_ifindex(g)) {
            return Err(format!(
                "a frame from {} on the interface of {}",
                eth.src_addr(),
                if_mac(gw_ifindex(g))
            ));
        }
        if ttl != 63 {
            return Err(format!("a frame with TTL {ttl}, not 63"));
        }
        n += 1;
    }
    Ok(n)
}
