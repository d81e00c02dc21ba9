//! [`PacketVec`]: a vector of packets as the rules see them, in columns — one array
//! per field, as the rule-major evaluator (`major`) reads them: a rule's test is a
//! loop down one column of the vector, not a load from each packet's record.
//!
//! A datapath fills it in place, in a worker's reused scratch: [`PacketVec::push_new`]
//! with the addresses, the protocol and the length, then the setters for what the
//! packet has (ports, TCP header, interfaces...); what it has not stays zero, as in
//! [`PacketInfo::new`]. [`Needs`] says which of the costly fields the program reads
//! at all, so that a describer can leave them out. [`PacketVec::push`] copies a
//! whole [`PacketInfo`] in (the form `eval_batch` takes).
//!
//! The hot columns (family, addresses, protocol, ports, TCP flags, ICMP type, frag,
//! direction, layer 2, length) are what the common tests read; IPv4 addresses are a
//! `u32` column of their own, so that a test of an IPv4 address list is a loop over
//! 4-byte words, and IPv6 addresses sit apart, read only for IPv6 packets. Flags are
//! bit masks of the vector (bit `k` for packet `k`).

use super::*;
use crate::state::FlowId;

/// Packets a [`PacketVec`] holds: the vector of `eval_batch` (VPP's frame).
pub const VECTOR: usize = 64;
const G: usize = VECTOR;

/// What a program's rules read beyond the fields every packet has: a describer
/// may leave out what is not needed (the program never reads it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Some rule tests `tcpoptions` ([`PacketInfo::tcp_opts`]).
    pub tcp_options: bool,
    /// Some rule names an interface (`via`, `recv`, `xmit`) or asks `antispoof` or
    /// `verrevpath` ([`PacketInfo::rcvif`], [`PacketInfo::xmitif`]).
    pub interfaces: bool,
    /// Some rule tests `mac` or `mac-type` ([`PacketInfo::mac`]).
    pub mac: bool,
    /// Some rule tests `tagged` or sets `tag`/`untag` ([`PacketInfo::tags`]): without
    /// one, the packets' tags are neither read nor changed.
    pub tags: bool,
    /// Some rule has `log`: verdicts are read for their `log` flag.
    pub log: bool,
}

/// The columns, read-only while the rules run.
pub(crate) struct Cols {
    pub(crate) n: usize,
    /// Bit masks: the source is IPv6 (the packet's family, as `ip6` asks), the
    /// destination is (the same in a real packet; `PacketInfo` can mix them), a
    /// later fragment, going out, the layer-2 pass.
    pub(crate) v6: u64,
    pub(crate) v6d: u64,
    pub(crate) frag: u64,
    pub(crate) out: u64,
    pub(crate) layer2: u64,
    /// IPv4 addresses (IPv6 packets: stale, never read).
    pub(crate) src4: [u32; G],
    pub(crate) dst4: [u32; G],
    /// IPv6 addresses (IPv4 packets: stale, never read).
    pub(crate) src6: [u128; G],
    pub(crate) dst6: [u128; G],
    pub(crate) proto: [u8; G],
    pub(crate) sport: [u16; G],
    pub(crate) dport: [u16; G],
    pub(crate) tcp_flags: [u8; G],
    /// (An ICMP query's or reply's identifier is in `sport`: ICMP has no ports,
    /// and a column of its own cost every vector its clearing and every packet
    /// its store.)
    pub(crate) icmp_type: [u8; G],
    pub(crate) len: [u32; G],
    pub(crate) ip_len: [u16; G],
    pub(crate) ttl: [u8; G],
    pub(crate) tos: [u8; G],
    pub(crate) tcp_win: [u16; G],
    pub(crate) tcp_opts: [u8; G],
    pub(crate) tcp_datalen: [u16; G],
    pub(crate) rcvif: [Option<IfRef>; G],
    pub(crate) xmitif: [Option<IfRef>; G],
    pub(crate) mac: [Option<MacHdr>; G],
    /// Bit mask: an ICMP error whose quoted flow is in `quote` (stale elsewhere,
    /// never read): errors are rare, so the flows are not cleared per vector.
    pub(crate) quoted: u64,
    /// On the heap, from the vector's first error on: inline, their 2.5 KiB were
    /// written and copied by every `eval_batch` (which has no quotes to keep),
    /// 1.9 ns a packet on bench fw's allow-1rule (20.0 against 18.1).
    pub(crate) quote: Option<Box<[FlowId; G]>>,
}

/// Up to [`VECTOR`] packets in columns, with their tags and, after
/// [`Program::eval_vec`], their verdicts. About 10 KiB: keep one per worker
/// ([`PacketVec::new`] boxes it) and [`clear`](PacketVec::clear) it per vector.
pub struct PacketVec {
    pub(crate) c: Cols,
    /// Bit `k`: packet `k`'s tags may be other than empty (its column entry is
    /// meaningful); clear bits read as no tags.
    pub(crate) tagged: u64,
    pub(crate) tags: [Tags; G],
    pub(crate) verdicts: [Verdict; G],
    /// After `eval_vec`: bit `k`, packet `k` was allowed.
    pub(crate) allowed: u64,
    /// Entries of the scalar columns that may be non-zero (cleared up to here).
    dirty: usize,
    /// Some entry of the interface columns (`set_ifaces`) or of the MAC column
    /// (`set_mac`) may be other than `None` since the last clear: those columns
    /// are `None` but where set, cleared only when some was (a describer that
    /// leaves them out pays no store a packet for them).
    ifaces_set: bool,
    mac_set: bool,
}

impl fmt::Debug for PacketVec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketVec")
            .field("len", &self.c.n)
            .field("allowed", &format_args!("{:#x}", self.allowed))
            .finish()
    }
}

const NO_FLOW: FlowId = FlowId {
    proto: 0,
    src: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    dst: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    sport: 0,
    dport: 0,
};

const NO_VERDICT: Verdict = Verdict {
    decision: Decision::Deny,
    rule: rule::DEFAULT_RULE,
    log: false,
};

/// The low `n` bits.
#[inline(always)]
pub(crate) fn low(n: usize) -> u64 {
    if n >= 64 {
        !0
    } else {
        (1u64 << n) - 1
    }
}

impl PacketVec {
    /// An empty vector, on the heap.
    pub fn new() -> Box<PacketVec> {
        Box::new(Self::blank())
    }

    pub(crate) fn blank() -> PacketVec {
        PacketVec {
            c: Cols {
                n: 0,
                v6: 0,
                v6d: 0,
                frag: 0,
                out: 0,
                layer2: 0,
                src4: [0; G],
                dst4: [0; G],
                src6: [0; G],
                dst6: [0; G],
                proto: [0; G],
                sport: [0; G],
                dport: [0; G],
                tcp_flags: [0; G],
                icmp_type: [0; G],
                len: [0; G],
                ip_len: [0; G],
                ttl: [0; G],
                tos: [0; G],
                tcp_win: [0; G],
                tcp_opts: [0; G],
                tcp_datalen: [0; G],
                rcvif: [None; G],
                xmitif: [None; G],
                mac: [None; G],
                quoted: 0,
                quote: None,
            },
            tagged: 0,
            tags: [Tags::default(); G],
            verdicts: [NO_VERDICT; G],
            allowed: 0,
            dirty: 0,
            ifaces_set: false,
            mac_set: false,
        }
    }

    /// Empties the vector (its columns zeroed as far as they were used).
    #[inline]
    pub fn clear(&mut self) {
        let d = self.dirty;
        let c = &mut self.c;
        c.sport[..d].fill(0);
        c.dport[..d].fill(0);
        c.tcp_flags[..d].fill(0);
        c.icmp_type[..d].fill(0);
        c.ip_len[..d].fill(0);
        c.ttl[..d].fill(0);
        c.tos[..d].fill(0);
        c.tcp_win[..d].fill(0);
        c.tcp_opts[..d].fill(0);
        c.tcp_datalen[..d].fill(0);
        if self.ifaces_set {
            c.rcvif[..d].fill(None);
            c.xmitif[..d].fill(None);
            self.ifaces_set = false;
        }
        if self.mac_set {
            c.mac[..d].fill(None);
            self.mac_set = false;
        }
        c.n = 0;
        c.v6 = 0;
        c.v6d = 0;
        c.frag = 0;
        c.out = 0;
        c.layer2 = 0;
        c.quoted = 0;
        self.tagged = 0;
        self.allowed = 0;
        self.dirty = 0;
    }

    pub fn len(&self) -> usize {
        self.c.n
    }

    pub fn is_empty(&self) -> bool {
        self.c.n == 0
    }

    pub fn is_full(&self) -> bool {
        self.c.n == G
    }

    /// Appends a packet of protocol `proto` between `src` and `dst`, `len` bytes
    /// (for the counters), everything else zero or absent, going in; returns its
    /// index. Panics if the vector is full.
    #[inline]
    pub fn push_new(&mut self, src: IpAddr, dst: IpAddr, proto: u8, len: u32) -> usize {
        if let (IpAddr::V4(s), IpAddr::V4(d)) = (src, dst) {
            return self.push_new4(u32::from(s), u32::from(d), proto, len);
        }
        // As `addr_bits` reads them: each address in its own family.
        let (s, s6) = addr_bits(src);
        let (d, d6) = addr_bits(dst);
        let k = self.push_new4(s as u32, d as u32, proto, len);
        let c = &mut self.c;
        c.src6[k] = s;
        c.dst6[k] = d;
        c.v6 |= (s6 as u64) << k;
        c.v6d |= (d6 as u64) << k;
        k
    }

    /// [`PacketVec::push_new`] for an IPv4 packet, its addresses as words (host
    /// order): the describer's fast path, no address enum to match.
    #[inline(always)]
    pub fn push_new4(&mut self, src: u32, dst: u32, proto: u8, len: u32) -> usize {
        let k = self.c.n;
        assert!(k < G, "PacketVec: full");
        let c = &mut self.c;
        c.src4[k] = src;
        c.dst4[k] = dst;
        c.proto[k] = proto;
        c.len[k] = len;
        c.n = k + 1;
        self.dirty = self.dirty.max(k + 1);
        k
    }

    /// Appends a copy of `p`; returns its index. Panics if the vector is full.
    pub fn push(&mut self, p: &PacketInfo) -> usize {
        let k = self.push_new(p.src, p.dst, p.proto, p.len);
        self.set_ports(k, p.sport, p.dport);
        self.set_tcp(k, p.tcp_flags, p.tcp_win, p.tcp_datalen);
        self.set_tcp_options(k, p.tcp_opts);
        self.set_icmp_type(k, p.icmp_type);
        if matches!(p.proto, 1 | 58) {
            self.set_icmp_id(k, p.icmp_id);
        }
        self.set_ip(k, p.ip_len, p.ttl, p.tos);
        if p.frag {
            self.set_frag(k);
        }
        self.set_dir(k, p.dir);
        self.set_ifaces(k, p.rcvif, p.xmitif);
        if let Some(m) = p.mac {
            self.set_mac(k, m);
        }
        if p.layer2 {
            self.set_layer2(k);
        }
        self.set_tags(k, p.tags);
        k
    }

    /// Packet `k`'s upper-layer protocol (IPv6: after the extension headers).
    #[inline]
    pub fn set_proto(&mut self, k: usize, proto: u8) {
        self.c.proto[k] = proto;
    }

    #[inline]
    pub fn set_ports(&mut self, k: usize, sport: u16, dport: u16) {
        self.c.sport[k] = sport;
        self.c.dport[k] = dport;
    }

    /// The TCP header's flags and window, and the segment's payload bytes.
    #[inline]
    pub fn set_tcp(&mut self, k: usize, flags: u8, win: u16, datalen: u16) {
        self.c.tcp_flags[k] = flags;
        self.c.tcp_win[k] = win;
        self.c.tcp_datalen[k] = datalen;
    }

    /// [`tcpopt`] bits.
    #[inline]
    pub fn set_tcp_options(&mut self, k: usize, opts: u8) {
        self.c.tcp_opts[k] = opts;
    }

    #[inline]
    pub fn set_icmp_type(&mut self, k: usize, t: u8) {
        self.c.icmp_type[k] = t;
    }

    /// An ICMP or ICMPv6 query's or reply's identifier ([`PacketInfo::icmp_id`]),
    /// kept where the source port would be: for ICMP and ICMPv6 packets only
    /// (the port rules never read an ICMP packet's ports).
    #[inline]
    pub fn set_icmp_id(&mut self, k: usize, id: u16) {
        self.c.sport[k] = id;
    }

    /// An ICMP or ICMPv6 error's quoted packet, as the flow its state has
    /// ([`FlowId::icmp`] for a quoted ICMP message): the state lookup of
    /// `check-state` (and of the first `keep-state`) is this flow's, changing
    /// nothing, and finds it only if the error goes to the quoted packet's source.
    /// [`PacketVec::get`] leaves it out. The vector's first quote allocates the
    /// room for them (kept while the vector is).
    #[inline]
    pub fn set_icmp_quote(&mut self, k: usize, q: FlowId) {
        self.c.quote.get_or_insert_with(|| Box::new([NO_FLOW; G]))[k] = q;
        self.c.quoted |= 1 << k;
    }

    /// IP total length (IPv6: payload length + 40), TTL or hop limit, TOS or
    /// traffic class.
    #[inline]
    pub fn set_ip(&mut self, k: usize, ip_len: u16, ttl: u8, tos: u8) {
        self.c.ip_len[k] = ip_len;
        self.c.ttl[k] = ttl;
        self.c.tos[k] = tos;
    }

    /// Packet `k` is a fragment other than the first.
    #[inline]
    pub fn set_frag(&mut self, k: usize) {
        self.c.frag |= 1 << k;
    }

    #[inline]
    pub fn set_dir(&mut self, k: usize, dir: Direction) {
        match dir {
            Direction::In => self.c.out &= !(1 << k),
            Direction::Out => self.c.out |= 1 << k,
        }
    }

    #[inline]
    pub fn set_ifaces(&mut self, k: usize, rcvif: Option<IfRef>, xmitif: Option<IfRef>) {
        self.c.rcvif[k] = rcvif;
        self.c.xmitif[k] = xmitif;
        self.ifaces_set = true;
    }

    /// The Ethernet header (it does not make this the layer-2 pass).
    #[inline]
    pub fn set_mac(&mut self, k: usize, mac: MacHdr) {
        self.c.mac[k] = Some(mac);
        self.mac_set = true;
    }

    /// Packet `k` is on the layer-2 pass.
    #[inline]
    pub fn set_layer2(&mut self, k: usize) {
        self.c.layer2 |= 1 << k;
    }

    #[inline]
    pub fn set_tags(&mut self, k: usize, tags: Tags) {
        self.tags[k] = tags;
        self.tagged |= 1 << k;
    }

    /// Packet `k`'s tags (after `eval_vec`, as the rules left them).
    #[inline]
    pub fn tags(&self, k: usize) -> Tags {
        if self.tagged & (1 << k) != 0 {
            self.tags[k]
        } else {
            Tags::default()
        }
    }

    /// Packet `k`'s verdict, after [`Program::eval_vec`].
    #[inline]
    pub fn verdict(&self, k: usize) -> Verdict {
        self.verdicts[k]
    }

    /// After [`Program::eval_vec`]: bit `k` is set if packet `k` was allowed (a
    /// caller need only look at the others).
    #[inline]
    pub fn allowed(&self) -> u64 {
        self.allowed
    }

    /// Packet `k` as a [`PacketInfo`] (fields a describer left out read as it
    /// left them).
    pub fn get(&self, k: usize) -> PacketInfo {
        let p = Col { c: &self.c, k };
        PacketInfo {
            src: p.addr(false),
            dst: p.addr(true),
            proto: p.proto(),
            sport: if p.icmp() { 0 } else { p.sport() },
            dport: p.dport(),
            tcp_flags: p.tcp_flags(),
            tcp_win: p.tcp_win(),
            tcp_opts: p.tcp_opts(),
            tcp_datalen: p.tcp_datalen(),
            icmp_type: p.icmp_type(),
            icmp_id: p.icmp_id(),
            ip_len: p.ip_len(),
            ttl: p.ttl(),
            tos: p.tos(),
            frag: p.frag(),
            dir: p.dir(),
            rcvif: p.rcvif(),
            xmitif: p.xmitif(),
            mac: p.mac(),
            layer2: p.layer2(),
            len: p.len(),
            tags: self.tags(k),
        }
    }

    /// Makes every packet's tags entry meaningful (empty where none was set), for
    /// rules that read or change them.
    #[inline]
    pub(crate) fn settle_tags(&mut self) {
        let mut untagged = !self.tagged & low(self.c.n);
        while untagged != 0 {
            let k = untagged.trailing_zeros() as usize;
            untagged &= untagged - 1;
            self.tags[k] = Tags::default();
        }
        self.tagged = low(self.c.n);
    }
}

/// The packet as the evaluator reads it: a [`PacketInfo`] (`eval`) or one packet of
/// a [`PacketVec`] (`eval_vec`), so that one walk serves both without copying a
/// packet out of its columns.
pub(crate) trait Pkt: Copy {
    fn addr(self, dst: bool) -> IpAddr;
    /// The address as `addr_bits` gives it: its bits and whether it is IPv6.
    fn addr_bits(self, dst: bool) -> (u128, bool);
    fn v6(self) -> bool;
    fn proto(self) -> u8;
    fn sport(self) -> u16;
    fn dport(self) -> u16;
    fn tcp_flags(self) -> u8;
    fn tcp_win(self) -> u16;
    fn tcp_opts(self) -> u8;
    fn tcp_datalen(self) -> u16;
    fn icmp_type(self) -> u8;
    fn icmp_id(self) -> u16;
    fn icmp_quote(self) -> Option<FlowId>;
    fn ip_len(self) -> u16;
    fn ttl(self) -> u8;
    fn tos(self) -> u8;
    fn frag(self) -> bool;
    fn dir(self) -> Direction;
    fn rcvif(self) -> Option<IfRef>;
    fn xmitif(self) -> Option<IfRef>;
    fn mac(self) -> Option<MacHdr>;
    fn layer2(self) -> bool;
    fn len(self) -> u32;

    #[inline(always)]
    fn has_ports(self) -> bool {
        !self.frag() && matches!(self.proto(), 6 | 17 | 132)
    }

    /// ICMP or ICMPv6 (whose identifier a vector keeps as the source port).
    #[inline(always)]
    fn icmp(self) -> bool {
        matches!(self.proto(), 1 | 58)
    }

    #[inline(always)]
    fn is_tcp(self) -> bool {
        !self.frag() && self.proto() == 6
    }
}

/// One [`PacketInfo`] as `eval` and `eval_error` walk it: the packet and, for an
/// ICMP error, the flow it quotes (which a `PacketInfo` has no field for: 40 bytes
/// more there would slow every packet `eval_batch` copies).
#[derive(Clone, Copy)]
pub(crate) struct One<'a> {
    pub(crate) p: &'a PacketInfo,
    /// By reference, so that `One` is two words: with the flow itself (48 bytes)
    /// a rule's microinstruction cost 2.3 ns instead of 1.8 (bench fw's fit).
    pub(crate) quote: Option<&'a FlowId>,
}

// `eval`'s walk reads the packet through a `One` in every rule: two words.
const _: () = assert!(std::mem::size_of::<One<'static>>() == 2 * std::mem::size_of::<usize>());

impl Pkt for One<'_> {
    #[inline(always)]
    fn addr(self, dst: bool) -> IpAddr {
        if dst {
            self.p.dst
        } else {
            self.p.src
        }
    }
    #[inline(always)]
    fn addr_bits(self, dst: bool) -> (u128, bool) {
        addr_bits(self.addr(dst))
    }
    #[inline(always)]
    fn v6(self) -> bool {
        self.p.src.is_ipv6()
    }
    #[inline(always)]
    fn proto(self) -> u8 {
        self.p.proto
    }
    #[inline(always)]
    fn sport(self) -> u16 {
        self.p.sport
    }
    #[inline(always)]
    fn dport(self) -> u16 {
        self.p.dport
    }
    #[inline(always)]
    fn tcp_flags(self) -> u8 {
        self.p.tcp_flags
    }
    #[inline(always)]
    fn tcp_win(self) -> u16 {
        self.p.tcp_win
    }
    #[inline(always)]
    fn tcp_opts(self) -> u8 {
        self.p.tcp_opts
    }
    #[inline(always)]
    fn tcp_datalen(self) -> u16 {
        self.p.tcp_datalen
    }
    #[inline(always)]
    fn icmp_type(self) -> u8 {
        self.p.icmp_type
    }
    #[inline(always)]
    fn icmp_id(self) -> u16 {
        self.p.icmp_id
    }
    #[inline(always)]
    fn icmp_quote(self) -> Option<FlowId> {
        self.quote.copied()
    }
    #[inline(always)]
    fn ip_len(self) -> u16 {
        self.p.ip_len
    }
    #[inline(always)]
    fn ttl(self) -> u8 {
        self.p.ttl
    }
    #[inline(always)]
    fn tos(self) -> u8 {
        self.p.tos
    }
    #[inline(always)]
    fn frag(self) -> bool {
        self.p.frag
    }
    #[inline(always)]
    fn dir(self) -> Direction {
        self.p.dir
    }
    #[inline(always)]
    fn rcvif(self) -> Option<IfRef> {
        self.p.rcvif
    }
    #[inline(always)]
    fn xmitif(self) -> Option<IfRef> {
        self.p.xmitif
    }
    #[inline(always)]
    fn mac(self) -> Option<MacHdr> {
        self.p.mac
    }
    #[inline(always)]
    fn layer2(self) -> bool {
        self.p.layer2
    }
    #[inline(always)]
    fn len(self) -> u32 {
        self.p.len
    }
}

/// Packet `k` of a vector's columns.
#[derive(Clone, Copy)]
pub(crate) struct Col<'a> {
    pub(crate) c: &'a Cols,
    pub(crate) k: usize,
}

impl Col<'_> {
    #[inline(always)]
    fn bit(self, m: u64) -> bool {
        m >> self.k & 1 != 0
    }
}

impl Pkt for Col<'_> {
    #[inline(always)]
    fn addr(self, dst: bool) -> IpAddr {
        match self.addr_bits(dst) {
            (a, true) => IpAddr::V6(a.into()),
            (a, false) => IpAddr::V4((a as u32).into()),
        }
    }
    #[inline(always)]
    fn addr_bits(self, dst: bool) -> (u128, bool) {
        let c = self.c;
        if self.bit(if dst { c.v6d } else { c.v6 }) {
            (if dst { c.dst6[self.k] } else { c.src6[self.k] }, true)
        } else {
            let a = if dst { c.dst4[self.k] } else { c.src4[self.k] };
            (a as u128, false)
        }
    }
    #[inline(always)]
    fn v6(self) -> bool {
        self.bit(self.c.v6)
    }
    #[inline(always)]
    fn proto(self) -> u8 {
        self.c.proto[self.k]
    }
    #[inline(always)]
    fn sport(self) -> u16 {
        self.c.sport[self.k]
    }
    #[inline(always)]
    fn dport(self) -> u16 {
        self.c.dport[self.k]
    }
    #[inline(always)]
    fn tcp_flags(self) -> u8 {
        self.c.tcp_flags[self.k]
    }
    #[inline(always)]
    fn tcp_win(self) -> u16 {
        self.c.tcp_win[self.k]
    }
    #[inline(always)]
    fn tcp_opts(self) -> u8 {
        self.c.tcp_opts[self.k]
    }
    #[inline(always)]
    fn tcp_datalen(self) -> u16 {
        self.c.tcp_datalen[self.k]
    }
    #[inline(always)]
    fn icmp_type(self) -> u8 {
        self.c.icmp_type[self.k]
    }
    #[inline(always)]
    fn icmp_id(self) -> u16 {
        if self.icmp() {
            self.c.sport[self.k]
        } else {
            0
        }
    }
    #[inline(always)]
    fn icmp_quote(self) -> Option<FlowId> {
        match &self.c.quote {
            Some(q) if self.bit(self.c.quoted) => Some(q[self.k]),
            _ => None,
        }
    }
    #[inline(always)]
    fn ip_len(self) -> u16 {
        self.c.ip_len[self.k]
    }
    #[inline(always)]
    fn ttl(self) -> u8 {
        self.c.ttl[self.k]
    }
    #[inline(always)]
    fn tos(self) -> u8 {
        self.c.tos[self.k]
    }
    #[inline(always)]
    fn frag(self) -> bool {
        self.bit(self.c.frag)
    }
    #[inline(always)]
    fn dir(self) -> Direction {
        if self.bit(self.c.out) {
            Direction::Out
        } else {
            Direction::In
        }
    }
    #[inline(always)]
    fn rcvif(self) -> Option<IfRef> {
        self.c.rcvif[self.k]
    }
    #[inline(always)]
    fn xmitif(self) -> Option<IfRef> {
        self.c.xmitif[self.k]
    }
    #[inline(always)]
    fn mac(self) -> Option<MacHdr> {
        self.c.mac[self.k]
    }
    #[inline(always)]
    fn layer2(self) -> bool {
        self.bit(self.c.layer2)
    }
    #[inline(always)]
    fn len(self) -> u32 {
        self.c.len[self.k]
    }
}
