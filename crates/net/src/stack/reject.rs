//! The answers to what a packet-filter hook refused (ipfw's `reject`, `unreach`,
//! `reset`): the hooks sit below the families and only say "refused, answer thus";
//! the worker, above them all, builds the answer with the family that can (ICMP,
//! ICMPv6, or a TCP reset), as FreeBSD's `send_reject` does from ipfw.

use crate::ip46::Ip46Cx;
use crate::pfil::{PfilPoint, Reject};
use mbuf::Mbuf;
use std::net::IpAddr;

/// Answers a packet a hook refused (`m` starts with its IP header): a TCP reset for
/// a TCP segment (RFC 9293 §3.10.7.1's form: from the segment's ACK number, or
/// acknowledging it), else ICMP or ICMPv6 destination unreachable with the code
/// asked for (port unreachable for a reset asked of a non-TCP packet). Never about a
/// reset.
pub(crate) fn send_reject(cx: &mut Ip46Cx<'_, '_>, m: Mbuf, point: PfilPoint, how: Reject) {
    cx.link.stats.pfil.rejected += 1;
    // The answer does not pass the hooks again (FreeBSD's M_SKIP_FIREWALL).
    let skip = std::mem::replace(&mut cx.link.pfil_skip, true);
    reject_answer(cx, m, point, how);
    cx.link.pfil_skip = skip;
}

fn reject_answer(cx: &mut Ip46Cx<'_, '_>, mut m: Mbuf, point: PfilPoint, how: Reject) {
    let mut v6 = point == PfilPoint::Inet6;
    if point == PfilPoint::Ether {
        // A refused frame is answered at the IP layer it carries, if any.
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, 0, 14) else {
            return;
        };
        match u16::from_be_bytes([h[12], h[13]]) {
            0x0800 => {}
            0x86dd => v6 = true,
            _ => return,
        }
        m.adj(14);
    }
    let (hlen, proto) = if v6 {
        match crate::hdr::hdr(cx.link.access, &mut m, 0, 40) {
            Ok(h) => (40, h[6]),
            Err(_) => return,
        }
    } else {
        match crate::hdr::hdr(cx.link.access, &mut m, 0, 20) {
            Ok(h) => (usize::from(h[0] & 0x0f) * 4, h[9]),
            Err(_) => return,
        }
    };
    if how == Reject::Rst && proto == 6 {
        return tcp_reset(cx, m, hlen, v6);
    }
    let code = match how {
        Reject::Unreach(c) | Reject::Unreach6(c) => c,
        Reject::Rst => {
            if v6 {
                4
            } else {
                3
            }
        }
    };
    if v6 {
        let e = crate::inet6::icmp6::Error6::Unreach(wire::Icmpv6DstUnreachable::from(code));
        crate::inet6::icmp6::icmp6_error(&mut cx.inet6(), m, e);
    } else {
        crate::inet::icmp::icmp_error(
            &mut cx.inet(),
            m,
            wire::Icmpv4Message::DstUnreachable,
            code,
            0,
        );
    }
}

fn tcp_reset(cx: &mut Ip46Cx<'_, '_>, mut m: Mbuf, hlen: usize, v6: bool) {
    let total = m.len();
    let (src, dst) = {
        let Ok(h) = crate::hdr::hdr(cx.link.access, &mut m, 0, hlen) else {
            return;
        };
        if v6 {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&h[8..24]);
            d.copy_from_slice(&h[24..40]);
            (IpAddr::from(s), IpAddr::from(d))
        } else {
            (
                IpAddr::from([h[12], h[13], h[14], h[15]]),
                IpAddr::from([h[16], h[17], h[18], h[19]]),
            )
        }
    };
    let Ok(t) = crate::hdr::hdr(cx.link.access, &mut m, hlen, 20) else {
        return;
    };
    let flags = t[13];
    if flags & 0x04 != 0 {
        return; // never answer a reset
    }
    let sport = u16::from_be_bytes([t[0], t[1]]);
    let dport = u16::from_be_bytes([t[2], t[3]]);
    let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
    let ack = (flags & 0x10 != 0).then(|| u32::from_be_bytes([t[8], t[9], t[10], t[11]]));
    let doff = usize::from(t[12] >> 4) * 4;
    let seg_len = total.saturating_sub(hlen + doff) as u32
        + u32::from(flags & 0x02 != 0)
        + u32::from(flags & 0x01 != 0);
    drop(m);
    // From the refused packet's destination, as FreeBSD's send_reject does (a
    // router's firewall answers for the host it protects).
    let tuple = crate::tcp::layer::Tuple {
        local: std::net::SocketAddr::new(dst, dport),
        remote: std::net::SocketAddr::new(src, sport),
    };
    let rst = crate::tcp::reset_answering(seq, ack, seg_len);
    cx.link.stats.tcp.sndrst += 1;
    crate::tcp::layer::send_segment(cx, &tuple, &rst, std::iter::empty(), Default::default());
}
