//! Rules as the ipfw(8) language writes them: the parser ([`crate::parse`]) builds
//! these, [`fmt::Display`] writes them back in `ipfw list`'s canonical form (so that
//! parse → list → parse gives the same rule), and [`crate::compile`] turns them into
//! microinstructions.

use std::fmt;
use std::net::IpAddr;

/// The number of the default rule, always last.
pub const DEFAULT_RULE: u16 = 65535;
/// Sets are numbered `0..SETS`; set 31 holds the default rule in FreeBSD.
pub const SETS: u8 = 32;

/// `prob` is kept as FreeBSD keeps it: a fraction of `2^31`.
pub const PROB_ONE: u32 = 1 << 31;

/// One rule: `[num] [set N] [prob p] ACTION [log] PROTO from SRC to DST [OPTIONS]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// 0 before [`crate::Ruleset::add`] numbers it.
    pub num: u16,
    pub set: u8,
    /// Match probability as a fraction of [`PROB_ONE`]; `None` is always.
    pub prob: Option<u32>,
    pub action: Action,
    pub log: bool,
    /// `log logamount N`: at most N lines for this rule until `ipfw zero` or
    /// `resetlog` (0: the firewall's default, `net.inet.ip.fw.verbose_limit`).
    pub log_amount: u32,
    pub proto: Proto,
    pub src: Endpoint,
    pub dst: Endpoint,
    /// Options in the order written; each block is one option or an `{ a or b }`
    /// block whose members carry their own `not`.
    pub opts: Vec<Vec<Opt>>,
}

/// A value that is either a number or `tablearg` (the value of the rule's last
/// successful table lookup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    Num(u32),
    Tablearg,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Allow,
    Deny,
    /// `reject`: ICMP host unreachable (or its IPv6 peer).
    Reject,
    Unreach(u8),
    Unreach6(u8),
    /// `reset`: a TCP RST (other protocols are dropped silently).
    Reset,
    Count,
    Skipto(Arg),
    Call(u16),
    Return,
    CheckState,
    Pipe(Arg),
    Queue(Arg),
    /// `fwd ADDR[,PORT]` (alias `forward`): accept the packet and hand it to the
    /// next hop `ADDR` instead of the route's gateway, or to the local stack when
    /// `ADDR` is one of this node's addresses (FreeBSD's `O_FORWARD_IP`/`O_FORWARD_IP6`,
    /// carried to the stack as the `PACKET_TAG_IPFORWARD` tag is).
    Fwd(IpAddr, Option<u16>),
}

/// The protocol field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proto {
    /// `ip` / `all`.
    Any,
    Ip4,
    Ip6,
    /// One protocol number, or a `{ tcp or udp }` list.
    List(Vec<u8>),
}

/// `from`/`to` operand: `[not] ADDR [ports]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub not: bool,
    pub addr: AddrSpec,
    pub ports: Option<Vec<Range>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrSpec {
    Any,
    /// Any address of this host (either family).
    Me,
    /// Any IPv6 address of this host.
    Me6,
    /// `table(NAME[,value])`.
    Table(String, Option<u32>),
    /// `a/len`, `a:mask`, `a,b,c` or `{ a or b }`.
    List(Vec<AddrMask>),
}

/// An address under a mask (not necessarily contiguous, as ipfw allows for IPv4);
/// `addr` is kept masked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrMask {
    pub addr: IpAddr,
    pub mask: IpAddr,
}

/// An inclusive range of numbers (ports, lengths, tags, ethertypes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub lo: u32,
    pub hi: u32,
}

/// A MAC address pattern: `any` or an exact address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacPat {
    Any,
    Addr([u8; 6]),
}

/// An interface pattern for `via`/`recv`/`xmit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IfPat {
    Any,
    Name(String),
    Table(String),
}

/// Bits to require set and clear (`tcpflags syn,!ack`, `tcpoptions`, `iptos`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlagSpec {
    pub set: u8,
    pub clear: u8,
}

/// Which packet field `lookup` takes to a number table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupKey {
    SrcPort,
    DstPort,
}

/// One option, possibly negated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opt {
    pub not: bool,
    pub kind: OptKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptKind {
    In,
    Out,
    Via(IfPat),
    Recv(IfPat),
    Xmit(IfPat),
    Setup,
    Established,
    TcpFlags(FlagSpec),
    Frag,
    IcmpTypes(Vec<Range>),
    Icmp6Types(Vec<Range>),
    Ip4,
    Ip6,
    Tagged(Vec<Range>),
    IpLen(Vec<Range>),
    IpTtl(Vec<Range>),
    IpTos(FlagSpec),
    Dscp(Vec<Range>),
    TcpOptions(FlagSpec),
    TcpWin(Vec<Range>),
    TcpDataLen(Vec<Range>),
    Mac(MacPat, MacPat),
    MacType(Vec<Range>),
    Layer2,
    Antispoof,
    Verrevpath,
    /// `lookup src-port|dst-port NAME`: the port in a number table.
    Lookup(LookupKey, String),
    /// `flow table(NAME)`: the packet's 5-tuple in a flow table.
    Flow(String),
    // Action modifiers: never negated, never in an or-block.
    KeepState,
    Limit(crate::state::LimitMask, u32),
    Tag(Arg),
    Untag(Arg),
}

impl OptKind {
    /// Whether this is an action modifier rather than a match condition.
    pub fn is_modifier(&self) -> bool {
        matches!(
            self,
            OptKind::KeepState | OptKind::Limit(..) | OptKind::Tag(_) | OptKind::Untag(_)
        )
    }
}

/// Names of protocol numbers, both ways.
pub(crate) const PROTO_NAMES: &[(&str, u8)] = &[
    ("icmp", 1),
    ("igmp", 2),
    ("tcp", 6),
    ("udp", 17),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("ipv6-icmp", 58),
    ("icmp6", 58),
    ("ospf", 89),
    ("pim", 103),
    ("sctp", 132),
];

/// `tcpflags` names in FreeBSD's order and bits.
pub(crate) const TCP_FLAGS: &[(&str, u8)] = &[
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ece", 0x40),
    ("cwr", 0x80),
];

/// `tcpoptions` names; bits as [`crate::PacketInfo::tcp_opts`] carries them.
pub(crate) const TCP_OPTS: &[(&str, u8)] = &[
    ("mss", 0x01),
    ("window", 0x02),
    ("sack", 0x04),
    ("ts", 0x08),
    ("cc", 0x10),
];

/// `iptos` names (RFC 791/1349 TOS bits, RFC 3168 `congestion` = CE).
pub(crate) const IP_TOS: &[(&str, u8)] = &[
    ("lowdelay", 0x10),
    ("throughput", 0x08),
    ("reliability", 0x04),
    ("mincost", 0x02),
    ("congestion", 0x01),
];

fn proto_name(p: u8) -> Option<&'static str> {
    PROTO_NAMES.iter().find(|(_, n)| *n == p).map(|(s, _)| *s)
}

fn write_ranges(f: &mut fmt::Formatter<'_>, r: &[Range]) -> fmt::Result {
    for (i, x) in r.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        if x.lo == x.hi {
            write!(f, "{}", x.lo)?;
        } else {
            write!(f, "{}-{}", x.lo, x.hi)?;
        }
    }
    Ok(())
}

fn write_flags(f: &mut fmt::Formatter<'_>, s: FlagSpec, names: &[(&str, u8)]) -> fmt::Result {
    let mut first = true;
    for (name, bit) in names {
        for (want, neg) in [(s.set, ""), (s.clear, "!")] {
            if want & bit != 0 {
                if !first {
                    f.write_str(",")?;
                }
                first = false;
                write!(f, "{neg}{name}")?;
            }
        }
    }
    Ok(())
}

fn write_arg(f: &mut fmt::Formatter<'_>, a: Arg) -> fmt::Result {
    match a {
        Arg::Num(n) => write!(f, "{n}"),
        Arg::Tablearg => f.write_str("tablearg"),
    }
}

fn mask_len(m: IpAddr) -> Option<u8> {
    let (bits, width) = match m {
        IpAddr::V4(a) => ((u32::from(a) as u128) << 96, 32),
        IpAddr::V6(a) => (u128::from(a), 128),
    };
    let len = bits.leading_ones();
    (bits.checked_shl(len).unwrap_or(0) == 0 && len <= width).then_some(len as u8)
}

impl fmt::Display for AddrMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = if self.addr.is_ipv4() { 32 } else { 128 };
        match mask_len(self.mask) {
            Some(l) if l == full => write!(f, "{}", self.addr),
            Some(l) => write!(f, "{}/{}", self.addr, l),
            None => write!(f, "{}:{}", self.addr, self.mask),
        }
    }
}

impl fmt::Display for MacPat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MacPat::Any => f.write_str("any"),
            MacPat::Addr(m) => write!(
                f,
                "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                m[0], m[1], m[2], m[3], m[4], m[5]
            ),
        }
    }
}

impl fmt::Display for IfPat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IfPat::Any => f.write_str("any"),
            IfPat::Name(n) => f.write_str(n),
            IfPat::Table(t) => write!(f, "table({t})"),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.not {
            f.write_str("not ")?;
        }
        match &self.addr {
            AddrSpec::Any => f.write_str("any")?,
            AddrSpec::Me => f.write_str("me")?,
            AddrSpec::Me6 => f.write_str("me6")?,
            AddrSpec::Table(t, None) => write!(f, "table({t})")?,
            AddrSpec::Table(t, Some(v)) => write!(f, "table({t},{v})")?,
            AddrSpec::List(l) => {
                for (i, a) in l.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{a}")?;
                }
            }
        }
        if let Some(p) = &self.ports {
            f.write_str(" ")?;
            write_ranges(f, p)?;
        }
        Ok(())
    }
}

impl fmt::Display for Opt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.not {
            f.write_str("not ")?;
        }
        match &self.kind {
            OptKind::In => f.write_str("in"),
            OptKind::Out => f.write_str("out"),
            OptKind::Via(i) => write!(f, "via {i}"),
            OptKind::Recv(i) => write!(f, "recv {i}"),
            OptKind::Xmit(i) => write!(f, "xmit {i}"),
            OptKind::Setup => f.write_str("setup"),
            OptKind::Established => f.write_str("established"),
            OptKind::TcpFlags(s) => {
                f.write_str("tcpflags ")?;
                write_flags(f, *s, TCP_FLAGS)
            }
            OptKind::Frag => f.write_str("frag"),
            OptKind::IcmpTypes(r) => {
                f.write_str("icmptypes ")?;
                write_ranges(f, r)
            }
            OptKind::Icmp6Types(r) => {
                f.write_str("icmp6types ")?;
                write_ranges(f, r)
            }
            OptKind::Ip4 => f.write_str("ip4"),
            OptKind::Ip6 => f.write_str("ip6"),
            OptKind::Tagged(r) => {
                f.write_str("tagged ")?;
                write_ranges(f, r)
            }
            OptKind::IpLen(r) => {
                f.write_str("iplen ")?;
                write_ranges(f, r)
            }
            OptKind::IpTtl(r) => {
                f.write_str("ipttl ")?;
                write_ranges(f, r)
            }
            OptKind::IpTos(s) => {
                f.write_str("iptos ")?;
                write_flags(f, *s, IP_TOS)
            }
            OptKind::Dscp(r) => {
                f.write_str("dscp ")?;
                write_ranges(f, r)
            }
            OptKind::TcpOptions(s) => {
                f.write_str("tcpoptions ")?;
                write_flags(f, *s, TCP_OPTS)
            }
            OptKind::TcpWin(r) => {
                f.write_str("tcpwin ")?;
                write_ranges(f, r)
            }
            OptKind::TcpDataLen(r) => {
                f.write_str("tcpdatalen ")?;
                write_ranges(f, r)
            }
            OptKind::Mac(d, s) => write!(f, "mac {d} {s}"),
            OptKind::MacType(r) => {
                f.write_str("mac-type ")?;
                write_ranges(f, r)
            }
            OptKind::Layer2 => f.write_str("layer2"),
            OptKind::Antispoof => f.write_str("antispoof"),
            OptKind::Verrevpath => f.write_str("verrevpath"),
            OptKind::Lookup(k, t) => {
                let k = match k {
                    LookupKey::SrcPort => "src-port",
                    LookupKey::DstPort => "dst-port",
                };
                write!(f, "lookup {k} {t}")
            }
            OptKind::Flow(t) => write!(f, "flow table({t})"),
            OptKind::KeepState => f.write_str("keep-state"),
            OptKind::Limit(m, n) => {
                f.write_str("limit")?;
                for (on, name) in [
                    (m.src_addr, "src-addr"),
                    (m.src_port, "src-port"),
                    (m.dst_addr, "dst-addr"),
                    (m.dst_port, "dst-port"),
                ] {
                    if on {
                        write!(f, " {name}")?;
                    }
                }
                write!(f, " {n}")
            }
            OptKind::Tag(a) => {
                f.write_str("tag ")?;
                write_arg(f, *a)
            }
            OptKind::Untag(a) => {
                f.write_str("untag ")?;
                write_arg(f, *a)
            }
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Allow => f.write_str("allow"),
            Action::Deny => f.write_str("deny"),
            Action::Reject => f.write_str("reject"),
            Action::Unreach(c) => write!(f, "unreach {c}"),
            Action::Unreach6(c) => write!(f, "unreach6 {c}"),
            Action::Reset => f.write_str("reset"),
            Action::Count => f.write_str("count"),
            Action::Skipto(a) => {
                f.write_str("skipto ")?;
                write_arg(f, *a)
            }
            Action::Call(n) => write!(f, "call {n}"),
            Action::Return => f.write_str("return"),
            Action::CheckState => f.write_str("check-state"),
            Action::Pipe(a) => {
                f.write_str("pipe ")?;
                write_arg(f, *a)
            }
            Action::Queue(a) => {
                f.write_str("queue ")?;
                write_arg(f, *a)
            }
            Action::Fwd(a, port) => {
                write!(f, "fwd {a}")?;
                match port {
                    Some(p) => write!(f, ",{p}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = |f: &mut fmt::Formatter<'_>, p: u8| match proto_name(p) {
            Some(n) => f.write_str(n),
            None => write!(f, "{p}"),
        };
        match self {
            Proto::Any => f.write_str("ip"),
            Proto::Ip4 => f.write_str("ip4"),
            Proto::Ip6 => f.write_str("ip6"),
            Proto::List(l) if l.len() == 1 => one(f, l[0]),
            Proto::List(l) => {
                f.write_str("{ ")?;
                for (i, p) in l.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" or ")?;
                    }
                    one(f, *p)?;
                }
                f.write_str(" }")
            }
        }
    }
}

/// `ipfw list`'s form: `00100 [set N] [prob P] ACTION [log] PROTO from SRC to DST OPTS`.
impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:05}", self.num)?;
        if self.set != 0 {
            write!(f, " set {}", self.set)?;
        }
        if let Some(p) = self.prob {
            write!(f, " prob {}", p as f64 / PROB_ONE as f64)?;
        }
        write!(f, " {}", self.action)?;
        if self.log {
            f.write_str(" log")?;
            if self.log_amount != 0 {
                write!(f, " logamount {}", self.log_amount)?;
            }
        }
        write!(f, " {} from {} to {}", self.proto, self.src, self.dst)?;
        for block in &self.opts {
            if block.len() == 1 {
                write!(f, " {}", block[0])?;
            } else {
                f.write_str(" {")?;
                for (i, o) in block.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" or")?;
                    }
                    write!(f, " {o}")?;
                }
                f.write_str(" }")?;
            }
        }
        Ok(())
    }
}
