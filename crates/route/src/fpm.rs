//! The Forwarding Plane Manager's wire format, as FRR's zebra speaks it
//! (`dplane_fpm_nl`): a stream of frames, each a 4-byte header (version 1, type 1
//! for netlink, the frame's length in network order, header included) around one or
//! more netlink messages. Of those, the routes: `RTM_NEWROUTE` and `RTM_DELROUTE`
//! (an `rtmsg`, then attributes: destination, gateway, output interface, priority,
//! table, multipath next hops). Next-hop objects (`RTM_NEWNEXTHOP`, zebra's
//! `fpm use-next-hop-groups`) and everything else are reported as such and not
//! followed; zebra is told `no fpm use-next-hop-groups`.
//!
//! Pure parsing, bounded by the frame (at most 65,535 bytes): every length is
//! checked before it is used, and a malformed message is an error, never a panic.

use crate::{IpPrefix, NhKind};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The frame header's length.
pub const HDR_LEN: usize = 4;
/// The header's version, and its type for netlink messages.
pub const VERSION: u8 = 1;
pub const TYPE_NETLINK: u8 = 1;

const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const NLMSG_HDR: usize = 16;
const RTMSG_LEN: usize = 12;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTN_UNSPEC: u8 = 0;
const RTN_UNICAST: u8 = 1;
const RTN_BROADCAST: u8 = 3;
const RTN_BLACKHOLE: u8 = 6;
const RTN_UNREACHABLE: u8 = 7;
const RTN_PROHIBIT: u8 = 8;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// Why a frame or message was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FpmError {
    /// A header of another version or type.
    Header { version: u8, kind: u8 },
    /// A length that does not fit what holds it.
    Length(&'static str),
    /// A field with a value the format does not have.
    Value(&'static str),
}

impl std::fmt::Display for FpmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FpmError::Header { version, kind } => {
                write!(
                    f,
                    "FPM header of version {version}, type {kind} (1, 1 expected)"
                )
            }
            FpmError::Length(w) => write!(f, "bad length: {w}"),
            FpmError::Value(w) => write!(f, "bad value: {w}"),
        }
    }
}

impl std::error::Error for FpmError {}

/// One next hop of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpmNexthop {
    pub gateway: Option<IpAddr>,
    /// The sender's interface index (zebra's kernel's; not ours).
    pub oif: u32,
    /// Multipath weight (1 and up).
    pub weight: u16,
}

/// A route as a routing daemon sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FpmRoute {
    pub dst: IpPrefix,
    /// What the route does: forward, or drop (blackhole, unreachable, prohibit).
    pub kind: NhKind,
    /// `rtm_protocol`: who made it (2 the kernel, 186 BGP, 188 OSPF, 196 static, …).
    pub protocol: u8,
    pub table: u32,
    pub metric: u32,
    pub nexthops: Vec<FpmNexthop>,
}

/// One netlink message of a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FpmMsg {
    /// `RTM_NEWROUTE`: add the route, or replace the one to the same destination.
    Add(FpmRoute),
    /// `RTM_DELROUTE`.
    Delete(FpmRoute),
    /// Anything else (its netlink type), or a route of a type or family not
    /// forwarded (local, broadcast, multicast, …).
    Other(u16),
}

/// Cuts a byte stream into frames: [`FpmStream::push`] what was read, then take
/// [`FpmStream::next_frame`] until `None`. Holds at most one partial frame.
#[derive(Debug, Default)]
pub struct FpmStream {
    buf: Vec<u8>,
    at: usize,
}

impl FpmStream {
    pub fn new() -> FpmStream {
        FpmStream::default()
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if self.at > 0 && self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        } else if self.at > 65_536 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame's netlink part, or `None` until more bytes come. A bad
    /// header is an error: the stream cannot be followed past it.
    pub fn next_frame(&mut self) -> Option<Result<&[u8], FpmError>> {
        let rest = &self.buf[self.at..];
        if rest.len() < HDR_LEN {
            return None;
        }
        let (version, kind) = (rest[0], rest[1]);
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        if version != VERSION || kind != TYPE_NETLINK {
            return Some(Err(FpmError::Header { version, kind }));
        }
        if len < HDR_LEN {
            return Some(Err(FpmError::Length("frame shorter than its header")));
        }
        if rest.len() < len {
            return None;
        }
        let start = self.at + HDR_LEN;
        self.at += len;
        Some(Ok(&self.buf[start..self.at]))
    }

    /// Bytes held (a partial frame).
    pub fn pending(&self) -> usize {
        self.buf.len() - self.at
    }
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, FpmError> {
    b.get(at..at + 2)
        .map(|x| u16::from_ne_bytes([x[0], x[1]]))
        .ok_or(FpmError::Length("u16 past the end"))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, FpmError> {
    b.get(at..at + 4)
        .map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
        .ok_or(FpmError::Length("u32 past the end"))
}

fn addr(family: u8, b: &[u8]) -> Result<IpAddr, FpmError> {
    match (family, b.len()) {
        (AF_INET, 4) => Ok(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        (AF_INET6, 16) => {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => Err(FpmError::Length("an address of its family's length")),
    }
}

/// The attributes in `b`: (type, payload), each checked against what holds it.
fn attrs(b: &[u8]) -> Result<Vec<(u16, &[u8])>, FpmError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= b.len() {
        let len = usize::from(u16_at(b, at)?);
        let kind = u16_at(b, at + 2)? & 0x3fff;
        if len < 4 || at + len > b.len() {
            return Err(FpmError::Length("attribute"));
        }
        out.push((kind, &b[at + 4..at + len]));
        at += (len + 3) & !3;
    }
    Ok(out)
}

/// `RTA_MULTIPATH`: a list of `rtnexthop` (length, flags, hops, ifindex) each
/// followed by its own attributes.
fn multipath(family: u8, b: &[u8]) -> Result<Vec<FpmNexthop>, FpmError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= b.len() {
        let len = usize::from(u16_at(b, at)?);
        if len < 8 || at + len > b.len() {
            return Err(FpmError::Length("rtnexthop"));
        }
        let hops = b[at + 3];
        let oif = u32_at(b, at + 4)?;
        let mut gateway = None;
        for (k, v) in attrs(&b[at + 8..at + len])? {
            if k == RTA_GATEWAY {
                gateway = Some(addr(family, v)?);
            } else if k == RTA_VIA && v.len() >= 2 {
                let fam = match u16::from_ne_bytes([v[0], v[1]]) {
                    2 => AF_INET,
                    10 => AF_INET6,
                    _ => return Err(FpmError::Value("RTA_VIA family")),
                };
                gateway = Some(addr(fam, &v[2..])?);
            }
        }
        out.push(FpmNexthop {
            gateway,
            oif,
            weight: u16::from(hops) + 1,
        });
        at += (len + 3) & !3;
    }
    Ok(out)
}

/// One route message's body (after the netlink header).
/// A withdrawal (`delete`) may leave the route's type unspecified, as zebra
/// does.
fn route(b: &[u8], delete: bool) -> Result<Option<FpmRoute>, FpmError> {
    if b.len() < RTMSG_LEN {
        return Err(FpmError::Length("rtmsg"));
    }
    let (family, dst_len, table8, protocol, kind) = (b[0], b[1], b[4], b[5], b[7]);
    let max = match family {
        AF_INET => 32,
        AF_INET6 => 128,
        _ => return Ok(None),
    };
    if dst_len > max {
        return Err(FpmError::Value("prefix length"));
    }
    let kind = match kind {
        RTN_UNICAST => NhKind::Forward,
        RTN_BLACKHOLE => NhKind::Blackhole,
        RTN_UNREACHABLE => NhKind::Reject,
        RTN_PROHIBIT => NhKind::Prohibit,
        RTN_UNSPEC if delete => NhKind::Forward,
        _ => return Ok(None),
    };
    let mut dst = None;
    let mut table = u32::from(table8);
    let mut metric = 0;
    let mut single = FpmNexthop {
        gateway: None,
        oif: 0,
        weight: 1,
    };
    let mut nexthops = Vec::new();
    for (k, v) in attrs(&b[RTMSG_LEN..])? {
        match k {
            RTA_DST => dst = Some(addr(family, v)?),
            RTA_GATEWAY => single.gateway = Some(addr(family, v)?),
            RTA_OIF => single.oif = u32_at(v, 0)?,
            RTA_PRIORITY => metric = u32_at(v, 0)?,
            RTA_TABLE => table = u32_at(v, 0)?,
            RTA_MULTIPATH => nexthops = multipath(family, v)?,
            _ => {}
        }
    }
    let unspec = if family == AF_INET {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    };
    if nexthops.is_empty() && (single.gateway.is_some() || single.oif != 0) {
        nexthops.push(single);
    }
    Ok(Some(FpmRoute {
        dst: IpPrefix::new(dst.unwrap_or(unspec), dst_len),
        kind,
        protocol,
        table,
        metric,
        nexthops,
    }))
}

/// The messages of one frame's netlink part (as [`FpmStream::next_frame`] gives it).
pub fn parse_frame(b: &[u8]) -> Result<Vec<FpmMsg>, FpmError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + NLMSG_HDR <= b.len() {
        let len = u32_at(b, at)? as usize;
        let kind = u16_at(b, at + 4)?;
        if len < NLMSG_HDR || len > b.len() - at {
            return Err(FpmError::Length("netlink message"));
        }
        let body = &b[at + NLMSG_HDR..at + len];
        out.push(match kind {
            RTM_NEWROUTE => route(body, false)?.map_or(FpmMsg::Other(kind), FpmMsg::Add),
            RTM_DELROUTE => route(body, true)?.map_or(FpmMsg::Other(kind), FpmMsg::Delete),
            k => FpmMsg::Other(k),
        });
        at += (len + 3) & !3;
    }
    if at < b.len() && b.len() - at >= 4 {
        return Err(FpmError::Length("trailing bytes"));
    }
    Ok(out)
}

/// A frame holding one route message, as zebra writes one (for tests and the
/// benchmark's feeder).
pub fn encode_route(add: bool, r: &FpmRoute) -> Vec<u8> {
    let family = if r.dst.is_ipv6() { AF_INET6 } else { AF_INET };
    let mut body = vec![
        family,
        r.dst.len(),
        0,
        0,
        r.table.min(255) as u8,
        r.protocol,
        0,
        match r.kind {
            NhKind::Forward => RTN_UNICAST,
            NhKind::Blackhole => RTN_BLACKHOLE,
            NhKind::Reject => RTN_UNREACHABLE,
            NhKind::Prohibit => RTN_PROHIBIT,
            NhKind::Broadcast => RTN_BROADCAST,
        },
        0,
        0,
        0,
        0,
    ];
    let put = |body: &mut Vec<u8>, kind: u16, v: &[u8]| {
        body.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
        body.extend_from_slice(&kind.to_ne_bytes());
        body.extend_from_slice(v);
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
    };
    let octets = |a: IpAddr| match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    put(&mut body, RTA_DST, &octets(r.dst.addr()));
    put(&mut body, RTA_PRIORITY, &r.metric.to_ne_bytes());
    match r.nexthops.as_slice() {
        [] => {}
        [one] if one.weight == 1 => {
            if let Some(g) = one.gateway {
                put(&mut body, RTA_GATEWAY, &octets(g));
            }
            put(&mut body, RTA_OIF, &one.oif.to_ne_bytes());
        }
        many => {
            let mut mp = Vec::new();
            for h in many {
                let mut inner = Vec::new();
                if let Some(g) = h.gateway {
                    put(&mut inner, RTA_GATEWAY, &octets(g));
                }
                mp.extend_from_slice(&((8 + inner.len()) as u16).to_ne_bytes());
                mp.push(0);
                mp.push(h.weight.saturating_sub(1).min(255) as u8);
                mp.extend_from_slice(&h.oif.to_ne_bytes());
                mp.extend_from_slice(&inner);
            }
            put(&mut body, RTA_MULTIPATH, &mp);
        }
    }
    let nl_len = NLMSG_HDR + body.len();
    let mut f = Vec::with_capacity(HDR_LEN + nl_len);
    f.push(VERSION);
    f.push(TYPE_NETLINK);
    f.extend_from_slice(&((HDR_LEN + nl_len) as u16).to_be_bytes());
    f.extend_from_slice(&(nl_len as u32).to_ne_bytes());
    f.extend_from_slice(&(if add { RTM_NEWROUTE } else { RTM_DELROUTE }).to_ne_bytes());
    f.extend_from_slice(&0x0501u16.to_ne_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&body);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as zebra 8.4 sent it here: 198.19.0.0/16 via 198.18.2.2, oif 4,
    /// metric 20, BGP.
    const ZEBRA_BGP: &str = "01010040 \
        3c000000 1800 0105 00000000 00000000 \
        02 10 00 00 fe ba 00 01 00000000 \
        08000100 c6130000 08000600 14000000 08000500 c6120202 08000400 04000000";

    /// zebra's withdrawal of 198.20.0.0/16 (BGP): route type unspecified, no
    /// next hop.
    const ZEBRA_BGP_DEL: &str = "01010030 \
        2c000000 1900 0104 00000000 00000000 \
        02 10 00 00 fe ba 00 00 00000000 \
        08000100 c6140000 08000600 14000000";

    #[test]
    fn zebras_withdrawal_reads_as_a_delete() {
        let f = hex(ZEBRA_BGP_DEL);
        let msgs = parse_frame(&f[HDR_LEN..]).unwrap();
        assert_eq!(
            msgs,
            [FpmMsg::Delete(FpmRoute {
                dst: "198.20.0.0/16".parse().unwrap(),
                kind: NhKind::Forward,
                protocol: 186,
                table: 254,
                metric: 20,
                nexthops: vec![],
            })]
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn zebras_frame_reads_as_the_route_it_sent() {
        let mut s = FpmStream::new();
        let f = hex(ZEBRA_BGP);
        // In two pieces, as TCP may deliver it.
        s.push(&f[..10]);
        assert!(s.next_frame().is_none());
        s.push(&f[10..]);
        let frame = s.next_frame().unwrap().unwrap().to_vec();
        assert!(s.next_frame().is_none());
        let msgs = parse_frame(&frame).unwrap();
        assert_eq!(
            msgs,
            [FpmMsg::Add(FpmRoute {
                dst: "198.19.0.0/16".parse().unwrap(),
                kind: NhKind::Forward,
                protocol: 186,
                table: 254,
                metric: 20,
                nexthops: vec![FpmNexthop {
                    gateway: Some("198.18.2.2".parse().unwrap()),
                    oif: 4,
                    weight: 1
                }],
            })]
        );
    }

    #[test]
    fn encoded_routes_read_back() {
        for r in [
            FpmRoute {
                dst: "2001:2:9::/48".parse().unwrap(),
                kind: NhKind::Forward,
                protocol: 186,
                table: 254,
                metric: 0,
                nexthops: vec![
                    FpmNexthop {
                        gateway: Some("2001:2:1::2".parse().unwrap()),
                        oif: 3,
                        weight: 1,
                    },
                    FpmNexthop {
                        gateway: Some("2001:2:2::2".parse().unwrap()),
                        oif: 4,
                        weight: 3,
                    },
                ],
            },
            FpmRoute {
                dst: "198.20.0.0/16".parse().unwrap(),
                kind: NhKind::Blackhole,
                protocol: 196,
                table: 254,
                metric: 0,
                nexthops: vec![],
            },
        ] {
            for add in [true, false] {
                let f = encode_route(add, &r);
                let mut s = FpmStream::new();
                s.push(&f);
                let msgs = parse_frame(s.next_frame().unwrap().unwrap()).unwrap();
                let want = if add {
                    FpmMsg::Add(r.clone())
                } else {
                    FpmMsg::Delete(r.clone())
                };
                assert_eq!(msgs, [want]);
            }
        }
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut s = FpmStream::new();
        s.push(&[2, 1, 0, 8, 0, 0, 0, 0]);
        assert!(matches!(s.next_frame(), Some(Err(FpmError::Header { .. }))));
        let mut s = FpmStream::new();
        s.push(&[1, 1, 0, 2]);
        assert!(matches!(s.next_frame(), Some(Err(FpmError::Length(_)))));
        // A netlink length past the frame, an attribute past the message, a prefix
        // longer than its family's.
        let f = hex(ZEBRA_BGP);
        let mut nl = f[4..].to_vec();
        nl[0] = 0xff;
        assert!(parse_frame(&nl).is_err());
        let mut nl = f[4..].to_vec();
        nl[28] = 0xf0;
        assert!(parse_frame(&nl).is_err());
        let mut nl = f[4..].to_vec();
        nl[17] = 33;
        assert_eq!(parse_frame(&nl), Err(FpmError::Value("prefix length")));
        // Not a route: reported, not parsed.
        let mut nl = f[4..].to_vec();
        nl[4] = 104;
        assert_eq!(parse_frame(&nl).unwrap(), [FpmMsg::Other(104)]);
    }
}
