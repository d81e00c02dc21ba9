//! Named counters, `netstat -s` style, kept per worker and summed when read.
//!
//! A worker owns a plain [`Stats`] and bumps fields with no atomics; once per batch it
//! publishes the whole block into its [`StatsSlot`] with relaxed stores (one cache line
//! run written by one thread only). Readers sum the slots of all workers. Every drop on
//! the data path has a [`DropReason`], and every `DropReason` maps onto exactly one counter.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counter_group {
    ($(#[$meta:meta])* $name:ident, $prefix:literal, { $($field:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $(pub $field: u64,)*
        }

        impl $name {
            /// The group's name as `netstat -s` users know it.
            pub const PREFIX: &'static str = $prefix;
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Calls `f` with each counter's short name and value, in declaration order.
            pub fn for_each(&self, mut f: impl FnMut(&'static str, u64)) {
                $(f(stringify!($field), self.$field);)*
            }

            // A group filled when the counters are read (`fw`) is never published.
            #[allow(dead_code)]
            fn write_to(&self, slots: &[AtomicU64], i: &mut usize) {
                $(slots[*i].store(self.$field, Ordering::Relaxed); *i += 1;)*
            }

            #[allow(dead_code)]
            fn add_from(&mut self, slots: &[AtomicU64], i: &mut usize) {
                $(self.$field += slots[*i].load(Ordering::Relaxed); *i += 1;)*
            }
        }

        impl std::ops::AddAssign for $name {
            fn add_assign(&mut self, o: Self) {
                $(self.$field += o.$field;)*
            }
        }
    };
}

counter_group!(
    /// Link layer (`ether_input`/`ether_output`). `ifdown`: frames that arrived on,
    /// or were queued for, an interface that is down (`ifconfig IF down`).
    EtherStat, "ether", {
        ipackets, opackets, tooshort, badaddr, notours, noproto, vlandrop, odropped, noif,
        ifdown,
    }
);

counter_group!(
    /// The learning bridge (`if_bridge`): frames received on members, forwarded to
    /// one member, flooded, delivered to the bridge's own interface, and the drops.
    /// `bpduguard`: BPDUs dropped on a member with BPDU guard (the first disables
    /// it); `rootguard`: BPDUs refused by root guard (the member is held
    /// blocking). `learned`, `moved`, `evicted`, `refused` (a full table's new
    /// addresses not learned), `expired`: the address tables' counts, kept by each
    /// table under its writer's lock, not per worker, and added in when the
    /// stack's counters are read (`RtStats::add_into`).
    BridgeStat, "bridge", {
        ipackets, forwarded, flooded, local, hostout, filtered, blocked, reserved,
        bpdus, bpdubad, bpdunostp, bpdusent, noclone, odropped, learnbusy,
        bpduguard, rootguard,
        learned, moved, evicted, refused, expired,
    }
);

counter_group!(
    /// 802.1Q VLAN interfaces: frames untagged for one, tagged from one.
    VlanStat, "vlan", {
        ipackets, opackets, nobufs,
    }
);

counter_group!(
    /// IP tunnels (`gif`, `gre`): packets taken off a tunnel and sent into one;
    /// `nomatch` (the endpoints are a tunnel's, the GRE key is not), `badhdr` (a
    /// GRE header refused or its checksum wrong, or an inner packet of another
    /// version than the outer header says), `noproto` (a GRE payload neither IPv4
    /// nor IPv6), `looped` (the outer destination routed through a tunnel),
    /// `odropped` (no buffer for the outer headers, or an inner packet not IP).
    TunnelStat, "tunnel", {
        ipackets, opackets, nomatch, badhdr, noproto, looped, odropped,
    }
);

counter_group!(
    /// ARP, named as FreeBSD's `arpstat`.
    ArpStat, "arp", {
        received, rxrequests, rxreplies, txrequests, txreplies, badlen, badproto,
        badaddr, dupips, dropped, timeouts, evicted, entries_created,
        // ARP whose sender claims a subnet's network or broadcast address.
        badspa,
    }
);

counter_group!(
    /// IPv4, named as FreeBSD's `ipstat` (without the `ips_` prefix).
    /// Fragments (`frag.rs`): `fragments` received, `fragdropped` duplicates and
    /// fragments of a poisoned datagram, `fragtimeout`, `fragoverlap`, `fragoverflow`
    /// (a table bound evicted them), `fragtoomany` (more than `max_frags`), `badfrags`
    /// (bad length), `fragtiny` (RFC 1858 offset 8), `reassembled` datagrams;
    /// `fragmented` datagrams, `ofragments` made of them, `cantfrag` (DF set);
    /// `fragq` is a gauge: datagrams in reassembly now.
    IpStat, "ip", {
        total, tooshort, toosmall, badsum, badhlen, badlen, badvers, badaddr,
        badoptions, fragments, fragdropped, cantforward, noproto, delivered,
        localout, noroute, odropped, toolong,
        fragtimeout, fragoverlap, fragoverflow, fragtoomany, badfrags, fragtiny,
        reassembled, fragmented, ofragments, cantfrag, fragq,
        // Forwarding (ip_forward): `forward`ed datagrams, `redirectsent`,
        // `timeexceed` (TTL ran out), `blackhole` and `reject` routes' drops,
        // `toobig` (DF set, larger than the next hop's MTU).
        forward, redirectsent, timeexceed, blackhole, reject, toobig,
        // Options and sources (ip_input): `srcroute`, source-routed datagrams (LSRR,
        // SSRR) dropped, or answered with "source route failed" when source routing
        // is on and the route cannot be followed (`badoptions` counts
        // malformed options, answered with a parameter problem); `localsrc`,
        // datagrams from a link whose source is one of our own addresses, to
        // forward or to us (the LAND attack); `bcastfwd`, directed broadcasts (to
        // a connected subnet's broadcast or network address) not forwarded.
        srcroute, localsrc, bcastfwd,
        // Checksum offload: TCP checksums left to a device and filled in software
        // instead (`swcsum`: the device has no offload, or the packet was
        // fragmented); `tso` packets sent whole to a device that segments them;
        // `swgso` TCP segments larger than the MTU (ours for a device that segments,
        // or a GSO packet from a TAP) cut into ordinary ones in software instead.
        swgso, swcsum, tso,
    }
);

counter_group!(
    /// ICMPv4, named as FreeBSD's `icmpstat` (without the `icps_` prefix).
    IcmpStat, "icmp", {
        error, oldicmp, oldshort, tooshort, checksum, badlen, badcode, reflect,
        bmcastecho, ratelim, inecho, inechoreply, inunreach, intimxceed, inother,
        outecho, outechoreply, outunreach, noport, outtimxceed, outparamprob,
    }
);

counter_group!(
    /// UDP, named as FreeBSD's `udpstat` (without the `udps_` prefix).
    UdpStat, "udp", {
        ipackets, hdrops, badsum, nosum, badlen, noport, noportbcast, fullsock,
        delivered, opackets, odropped,
    }
);

counter_group!(
    /// IPv6, named as FreeBSD's `ip6stat` (without the `ip6s_` prefix).
    Ip6Stat, "ip6", {
        total, tooshort, toosmall, badvers, badscope, notmember, badoptions,
        toomanyhdr, rthdr0, unknownhdr, ah, esp, cantforward, delivered, localout,
        noroute, odropped, toolong, fragments, fragdropped, fragtimeout, reassembled,
        fragmented, ofragments, cantfrag,
        // frag.rs: as the `ip` ones, plus `atomicfrags` (RFC 6946) and `fragtoolong`
        // (RFC 8200 §4.5: a reassembled payload over 65535); `fragq` is a gauge.
        fragoverlap, fragoverflow, fragtoomany, badfrags, fragtiny, fragtoolong,
        atomicfrags, fragq,
        // Forwarding (ip6_forward), as the `ip` ones; `localsrc` as `ip.localsrc`.
        forward, redirectsent, timeexceed, blackhole, reject, toobig, localsrc,
        // As `ip.swgso`, `ip.swcsum` and `ip.tso`.
        swgso, swcsum, tso,
    }
);

counter_group!(
    /// ICMPv6, named as FreeBSD's `icmp6stat` (without the `icp6s_` prefix; the
    /// per-type histograms as `in*`/`out*` counters).
    Icmp6Stat, "icmp6", {
        error, tooshort, checksum, badlen, badcode, ratelim, inecho, inechoreply,
        indstunreach, inpkttoobig, intimxceed, inparamprob, inroutersolicit,
        inrouteradvert, inneighborsolicit, inneighboradvert, inredirect, inmld, inother,
        outecho, outechoreply, outdstunreach, outpkttoobig, outtimxceed, outparamprob,
        outroutersolicit, outrouteradvert, outneighborsolicit, outneighboradvert, outmldreport, outredirect,
        badns, badna, badrs, badra, badredirect, noerror, badpkttoobig,
        // An error quoting a packet no socket or connection of ours sent (as
        // `icmp.noport`).
        noport,
    }
);

counter_group!(
    /// IPv6 neighbour discovery: the neighbour table, duplicate address detection,
    /// and stateless autoconfiguration: addresses formed (`autoconf`), refused
    /// because the interface holds all it may (`autoconffull`), removed when their
    /// valid lifetime ended (`autoconfexpired`), and deprecated ones removed to make
    /// room for a new prefix (`autoconfreclaimed`).
    Nd6Stat, "nd6", {
        entries_created, evicted, timeouts, txsolicit, dropped, dadsent, dadcollision,
        dadok, autoconf, autoconffull, autoconfexpired, autoconfreclaimed,
    }
);

counter_group!(
    /// The per-worker flow table (`StackConfig::flow_table`, stateful forwarding), as
    /// `route::FlowStats` counts: `misses` include `stale` entries (their next hop
    /// changed) and `expired` ones; `evictions` replaced a live entry in a full set.
    FlowStat, "flowtable", {
        hits, misses, stale, expired, inserts, evictions,
    }
);

counter_group!(
    /// Packet filter hook points.
    PfilStat, "pfil", {
        ether_in_drop, ether_out_drop, ip_in_drop, ip_out_drop, ip6_in_drop, ip6_out_drop,
        consumed, rejected,
    }
);

counter_group!(
    /// TCP, named as FreeBSD's `tcpstat` (without the `tcps_` prefix).
    TcpStat, "tcp", {
        connattempt, accepts, connects, drops, conndrops, closed, timeoutdrop,
        sndtotal, sndpack, sndbyte, sndrexmitpack, sndrexmitbyte, sndacks, delack,
        sndprobe, sndrst, sndwinup, rcvtotal, rcvpack, rcvbyte, rcvduppack, rcvdupbyte,
        rcvpartduppack, rcvoopack, rcvoobyte, rcvoodrop, rcvpackafterwin, rcvafterclose,
        rcvdupack, rcvacktoomuch, rcvackpack, rcvackbyte, rcvwinprobe, rcvwinupd,
        pawsdrop, rcvbadrst, rcvbadsyn, challengeack, rexmttimeo, persisttimeo,
        fastrexmit, rttupdated, segstimed, rcvshort, rcvbadoff, rcvbadsum, noport,
        listendrop, handoff, keeptimeo, keepprobe, keepdrops, syncookiessent,
        syncookiesrecvd, pcbcount, timewaitreuse, handoffdrop, tlpprobes, sndrexmitbad,
        tfo_cookiereq, tfo_cookierecvd, tfo_syndata, tfo_syndata_acked, tfo_syndata_rexmit,
        tfo_pathoff, tfo_cookiesent, tfo_passive, tfo_badcookie, tfo_overflow,
        rexmitlost, listennosyn, timerentries, rcvacktooold,
        connaddrinuse, conntablefull, mturesent, sndbyteshared, rcvbyteshared,
        hystartcss, hystartresume, hystartca, lroqueued, lroflushed, rcvnoack,
        ecn_ce, ecn_ect0, ecn_rcwnd, ecn_shs, dsack_count, dsack_bytes, dsackundo,
        frto_spurious, racklost, rackreorder, racktimeo, finwait2_drops, persistdrop,
        // Connections closed by their application and still live (a gauge, as
        // `pcbcount`; Linux's "orphan" of /proc/net/sockstat), and those reset at
        // the close because `max_orphans` were held.
        orphans, orphandrop,
        // ICMP errors quoting a connection's segment with a sequence number outside
        // what it has outstanding, [snd_una, snd_max) (RFC 5927 §4.1; Linux's
        // OutOfWindowIcmps): ignored.
        outofwindowicmps,
        // Challenge ACKs (and ACKs for an ACK of data not yet sent) skipped by
        // the per-connection or the node's limit (`ack_war_cnt`,
        // `challenge_ack_limit`), TIME_WAIT's ACKs skipped by the node's; resets
        // not sent for segments that found no connection or a SYN cookie's ACK
        // that found no room (`rst_limit`).
        challengeack_ratelim, rst_ratelim,
        // TCP buffer memory (`net.inet.tcp.mem`, `tcp::mem`): bytes held by
        // every connection's buffers and channels (a gauge; each worker's share),
        // the state (a gauge the stack fills in: 0 normal, 1 pressure, 2 high),
        // times pressure and high were entered, refusals (a connection's write held
        // or its received data dropped at the clamp), orphans reset above high.
        mem, memstate, mempressure, memhigh, memrefused, memorphandrop,
        // Closes with received data unread, answered with a reset
        // (`close_unread_rst`; Linux's TCPAbortOnClose).
        abortonclose,
        // Bytes received on a connection shut down for reading, acknowledged
        // and dropped (`shutdown(SHUT_RD)`, FreeBSD's `sorflush`).
        rcvshutrdbyte,
    }
);

counter_group!(
    /// Netchannels (`Stack::netchannel`): packets `delivered` to one, dropped on a
    /// `full` receive queue, `sent` from one, and dropped as not a packet
    /// (`badpkt`: not IPv4 or IPv6, a header that does not parse, lengths that
    /// disagree, a transport header too short for its checksum).
    NetchanStat, "netchan", {
        delivered, full, sent, badpkt,
    }
);

counter_group!(
    /// The ipfw firewall's dynamic states (FreeBSD's `net.inet.ip.fw.dyn_*`), as
    /// its hook reports them when the counters are read (they are the state
    /// table's, not a worker's): `dyn_count` is a gauge, the states held now
    /// (expired ones not yet swept included); `dyn_created`; `dyn_expired`, dropped
    /// for their age; refused, `dyn_full` because the table held `dyn_max` states
    /// (FreeBSD's "Too many dynamic rules"; the packet is denied, and counted in
    /// `pfil` too) and `dyn_limited` by a `limit` rule.
    FwStat, "fw", {
        dyn_count, dyn_created, dyn_expired, dyn_full, dyn_limited,
    }
);

/// All counters of one worker, or the sum over workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub ether: EtherStat,
    pub bridge: BridgeStat,
    pub vlan: VlanStat,
    pub tunnel: TunnelStat,
    pub arp: ArpStat,
    pub ip: IpStat,
    pub icmp: IcmpStat,
    pub udp: UdpStat,
    pub pfil: PfilStat,
    pub tcp: TcpStat,
    pub ip6: Ip6Stat,
    pub icmp6: Icmp6Stat,
    pub nd6: Nd6Stat,
    pub flow: FlowStat,
    pub netchan: NetchanStat,
    /// Filled by [`crate::pfil::PfilHook::add_stats`] when the stack's counters
    /// are read; never in a worker's block.
    pub fw: FwStat,
}

const NUM_COUNTERS: usize = EtherStat::NAMES.len()
    + BridgeStat::NAMES.len()
    + VlanStat::NAMES.len()
    + TunnelStat::NAMES.len()
    + ArpStat::NAMES.len()
    + IpStat::NAMES.len()
    + IcmpStat::NAMES.len()
    + UdpStat::NAMES.len()
    + PfilStat::NAMES.len()
    + TcpStat::NAMES.len()
    + Ip6Stat::NAMES.len()
    + Icmp6Stat::NAMES.len()
    + Nd6Stat::NAMES.len()
    + FlowStat::NAMES.len()
    + NetchanStat::NAMES.len();

impl Stats {
    /// Calls `f` with every counter's full name (`ip.badsum`) and value.
    pub fn for_each(&self, mut f: impl FnMut(&'static str, &'static str, u64)) {
        self.ether.for_each(|n, v| f(EtherStat::PREFIX, n, v));
        self.bridge.for_each(|n, v| f(BridgeStat::PREFIX, n, v));
        self.vlan.for_each(|n, v| f(VlanStat::PREFIX, n, v));
        self.tunnel.for_each(|n, v| f(TunnelStat::PREFIX, n, v));
        self.arp.for_each(|n, v| f(ArpStat::PREFIX, n, v));
        self.ip.for_each(|n, v| f(IpStat::PREFIX, n, v));
        self.icmp.for_each(|n, v| f(IcmpStat::PREFIX, n, v));
        self.udp.for_each(|n, v| f(UdpStat::PREFIX, n, v));
        self.pfil.for_each(|n, v| f(PfilStat::PREFIX, n, v));
        self.tcp.for_each(|n, v| f(TcpStat::PREFIX, n, v));
        self.ip6.for_each(|n, v| f(Ip6Stat::PREFIX, n, v));
        self.icmp6.for_each(|n, v| f(Icmp6Stat::PREFIX, n, v));
        self.nd6.for_each(|n, v| f(Nd6Stat::PREFIX, n, v));
        self.flow.for_each(|n, v| f(FlowStat::PREFIX, n, v));
        self.netchan.for_each(|n, v| f(NetchanStat::PREFIX, n, v));
        self.fw.for_each(|n, v| f(FwStat::PREFIX, n, v));
    }

    /// Looks a counter up by its full name, e.g. `"udp.noport"`.
    pub fn get(&self, name: &str) -> Option<u64> {
        let mut found = None;
        self.for_each(|g, n, v| {
            if found.is_none() && name.len() == g.len() + 1 + n.len() {
                if let Some(rest) = name.strip_prefix(g).and_then(|r| r.strip_prefix('.')) {
                    if rest == n {
                        found = Some(v);
                    }
                }
            }
        });
        found
    }

    /// Sum of every drop counter (all counters named by a [`DropReason`]).
    pub fn total_drops(&self) -> u64 {
        DropReason::ALL
            .iter()
            .map(|r| self.get(r.counter()).unwrap_or(0))
            .sum()
    }

    /// Writes `netstat -s`-like text: one line per non-zero counter, grouped.
    pub fn write_netstat(&self, out: &mut impl std::fmt::Write, all: bool) -> std::fmt::Result {
        let mut last = "";
        let mut res = Ok(());
        self.for_each(|g, n, v| {
            if res.is_err() || (v == 0 && !all) {
                return;
            }
            if g != last {
                res = writeln!(out, "{g}:");
                last = g;
            }
            if res.is_ok() {
                res = writeln!(out, "\t{v:>12} {g}.{n}");
            }
        });
        res
    }
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Self) {
        self.ether += o.ether;
        self.bridge += o.bridge;
        self.vlan += o.vlan;
        self.tunnel += o.tunnel;
        self.arp += o.arp;
        self.ip += o.ip;
        self.icmp += o.icmp;
        self.udp += o.udp;
        self.pfil += o.pfil;
        self.tcp += o.tcp;
        self.ip6 += o.ip6;
        self.icmp6 += o.icmp6;
        self.nd6 += o.nd6;
        self.flow += o.flow;
        self.netchan += o.netchan;
        self.fw += o.fw;
    }
}

/// A worker's published counters: written only by that worker, read by anyone.
#[derive(Debug)]
pub struct StatsSlot {
    slots: Box<[AtomicU64]>,
}

impl Default for StatsSlot {
    fn default() -> Self {
        StatsSlot {
            slots: (0..NUM_COUNTERS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl StatsSlot {
    /// Publishes a worker's block (relaxed stores; readers may see a mix of two batches,
    /// which is fine for counters).
    pub fn publish(&self, s: &Stats) {
        let mut i = 0;
        s.ether.write_to(&self.slots, &mut i);
        s.bridge.write_to(&self.slots, &mut i);
        s.vlan.write_to(&self.slots, &mut i);
        s.tunnel.write_to(&self.slots, &mut i);
        s.arp.write_to(&self.slots, &mut i);
        s.ip.write_to(&self.slots, &mut i);
        s.icmp.write_to(&self.slots, &mut i);
        s.udp.write_to(&self.slots, &mut i);
        s.pfil.write_to(&self.slots, &mut i);
        s.tcp.write_to(&self.slots, &mut i);
        s.ip6.write_to(&self.slots, &mut i);
        s.icmp6.write_to(&self.slots, &mut i);
        s.nd6.write_to(&self.slots, &mut i);
        s.flow.write_to(&self.slots, &mut i);
        s.netchan.write_to(&self.slots, &mut i);
    }

    /// Adds this slot's values into `acc`.
    pub fn add_into(&self, acc: &mut Stats) {
        let mut i = 0;
        acc.ether.add_from(&self.slots, &mut i);
        acc.bridge.add_from(&self.slots, &mut i);
        acc.vlan.add_from(&self.slots, &mut i);
        acc.tunnel.add_from(&self.slots, &mut i);
        acc.arp.add_from(&self.slots, &mut i);
        acc.ip.add_from(&self.slots, &mut i);
        acc.icmp.add_from(&self.slots, &mut i);
        acc.udp.add_from(&self.slots, &mut i);
        acc.pfil.add_from(&self.slots, &mut i);
        acc.tcp.add_from(&self.slots, &mut i);
        acc.ip6.add_from(&self.slots, &mut i);
        acc.icmp6.add_from(&self.slots, &mut i);
        acc.nd6.add_from(&self.slots, &mut i);
        acc.flow.add_from(&self.slots, &mut i);
        acc.netchan.add_from(&self.slots, &mut i);
    }
}

macro_rules! drop_reasons {
    ($($variant:ident => $group:ident . $field:ident),* $(,)?) => {
        /// Why a packet was dropped. Each reason bumps exactly one named counter.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum DropReason {
            $($variant,)*
        }

        impl DropReason {
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];

            /// The counter this reason bumps, e.g. `"ip.badsum"`.
            pub fn counter(self) -> &'static str {
                match self {
                    $(DropReason::$variant => concat!(stringify!($group), ".", stringify!($field)),)*
                }
            }

            /// Counts one drop.
            #[inline]
            pub fn count(self, s: &mut Stats) {
                self.count_n(s, 1);
            }

            /// Counts `n` drops at once (a queue of packets discarded together).
            #[inline]
            pub fn count_n(self, s: &mut Stats, n: u64) {
                match self {
                    $(DropReason::$variant => s.$group.$field += n,)*
                }
            }
        }

        impl std::fmt::Display for DropReason {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.counter())
            }
        }
    };
}

drop_reasons! {
    EtherTooShort => ether.tooshort,
    EtherBadAddr => ether.badaddr,
    EtherNotOurs => ether.notours,
    EtherNoProto => ether.noproto,
    EtherVlan => ether.vlandrop,
    EtherOutDropped => ether.odropped,
    EtherNoIf => ether.noif,
    EtherIfDown => ether.ifdown,
    BridgeFiltered => bridge.filtered,
    BridgeBlocked => bridge.blocked,
    BridgeReserved => bridge.reserved,
    BridgeBpduBad => bridge.bpdubad,
    BridgeBpduNoStp => bridge.bpdunostp,
    BridgeBpduGuard => bridge.bpduguard,
    BridgeNoClone => bridge.noclone,
    BridgeOutDropped => bridge.odropped,
    VlanNoBufs => vlan.nobufs,
    TunnelNoMatch => tunnel.nomatch,
    TunnelBadHdr => tunnel.badhdr,
    TunnelNoProto => tunnel.noproto,
    TunnelLoop => tunnel.looped,
    TunnelOutDropped => tunnel.odropped,
    ArpBadLen => arp.badlen,
    ArpBadProto => arp.badproto,
    ArpBadAddr => arp.badaddr,
    ArpDupIp => arp.dupips,
    ArpHoldDropped => arp.dropped,
    ArpBadSpa => arp.badspa,
    IpTooShort => ip.tooshort,
    IpTooSmall => ip.toosmall,
    IpBadSum => ip.badsum,
    IpBadHlen => ip.badhlen,
    IpBadLen => ip.badlen,
    IpBadVers => ip.badvers,
    IpBadAddr => ip.badaddr,
    IpFragDropped => ip.fragdropped,
    IpCantForward => ip.cantforward,
    IpNoProto => ip.noproto,
    IpNoRoute => ip.noroute,
    IpOutDropped => ip.odropped,
    IpTooLong => ip.toolong,
    IpFragTimeout => ip.fragtimeout,
    IpFragOverlap => ip.fragoverlap,
    IpFragOverflow => ip.fragoverflow,
    IpFragTooMany => ip.fragtoomany,
    IpBadFrags => ip.badfrags,
    IpFragTiny => ip.fragtiny,
    IpCantFrag => ip.cantfrag,
    IpTimeExceed => ip.timeexceed,
    IpBlackhole => ip.blackhole,
    IpReject => ip.reject,
    IpTooBig => ip.toobig,
    IpSrcRoute => ip.srcroute,
    IpLocalSrc => ip.localsrc,
    IpBcastFwd => ip.bcastfwd,
    IcmpTooShort => icmp.tooshort,
    IcmpChecksum => icmp.checksum,
    IcmpBadLen => icmp.badlen,
    IcmpBmcastEcho => icmp.bmcastecho,
    IcmpOther => icmp.inother,
    IcmpNoPort => icmp.noport,
    // ---- ip6 (frag.rs)
    Ip6FragTimeout => ip6.fragtimeout,
    Ip6FragOverlap => ip6.fragoverlap,
    Ip6FragOverflow => ip6.fragoverflow,
    Ip6FragTooMany => ip6.fragtoomany,
    Ip6BadFrags => ip6.badfrags,
    Ip6FragTiny => ip6.fragtiny,
    Ip6FragTooLong => ip6.fragtoolong,
    // ---- end ip6
    UdpHdrops => udp.hdrops,
    UdpBadSum => udp.badsum,
    UdpBadLen => udp.badlen,
    UdpNoPort => udp.noport,
    UdpNoPortBcast => udp.noportbcast,
    UdpFullSock => udp.fullsock,
    NetchanFull => netchan.full,
    NetchanBadPkt => netchan.badpkt,
    TcpShort => tcp.rcvshort,
    TcpBadOff => tcp.rcvbadoff,
    TcpBadSum => tcp.rcvbadsum,
    TcpNoPort => tcp.noport,
    TcpListenDrop => tcp.listendrop,
    TcpHandoffDrop => tcp.handoffdrop,
    Ip6TooShort => ip6.tooshort,
    Ip6TooSmall => ip6.toosmall,
    Ip6BadVers => ip6.badvers,
    Ip6BadScope => ip6.badscope,
    Ip6NotMember => ip6.notmember,
    Ip6BadOptions => ip6.badoptions,
    Ip6TooManyHdr => ip6.toomanyhdr,
    Ip6Rthdr0 => ip6.rthdr0,
    Ip6UnknownHdr => ip6.unknownhdr,
    Ip6Ah => ip6.ah,
    Ip6Esp => ip6.esp,
    Ip6CantForward => ip6.cantforward,
    Ip6NoRoute => ip6.noroute,
    Ip6OutDropped => ip6.odropped,
    Ip6TooLong => ip6.toolong,
    Ip6FragDropped => ip6.fragdropped,
    Ip6TimeExceed => ip6.timeexceed,
    Ip6Blackhole => ip6.blackhole,
    Ip6Reject => ip6.reject,
    Ip6TooBig => ip6.toobig,
    Ip6LocalSrc => ip6.localsrc,
    Icmp6TooShort => icmp6.tooshort,
    Icmp6Checksum => icmp6.checksum,
    Icmp6BadLen => icmp6.badlen,
    Icmp6BadCode => icmp6.badcode,
    Icmp6RateLim => icmp6.ratelim,
    Icmp6Other => icmp6.inother,
    Icmp6BadNs => icmp6.badns,
    Icmp6BadNa => icmp6.badna,
    Icmp6BadRs => icmp6.badrs,
    Icmp6BadRa => icmp6.badra,
    Icmp6BadRedirect => icmp6.badredirect,
    Icmp6NoError => icmp6.noerror,
    Nd6HoldDropped => nd6.dropped,
    Nd6AutoconfFull => nd6.autoconffull,
    PfilEtherIn => pfil.ether_in_drop,
    PfilEtherOut => pfil.ether_out_drop,
    PfilIpIn => pfil.ip_in_drop,
    PfilIpOut => pfil.ip_out_drop,
    PfilIp6In => pfil.ip6_in_drop,
    PfilIp6Out => pfil.ip6_out_drop,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_drop_reason_names_a_real_counter_once() {
        let s = Stats::default();
        let mut seen = std::collections::HashSet::new();
        for r in DropReason::ALL {
            assert!(
                s.get(r.counter()).is_some(),
                "{} is not a counter",
                r.counter()
            );
            assert!(seen.insert(r.counter()), "{} named twice", r.counter());
            let mut t = Stats::default();
            r.count(&mut t);
            assert_eq!(t.get(r.counter()), Some(1));
            assert_eq!(t.total_drops(), 1);
        }
    }

    #[test]
    fn publish_and_sum() {
        let a = StatsSlot::default();
        let b = StatsSlot::default();
        let mut s = Stats::default();
        s.ip.badsum = 3;
        s.pfil.consumed = 1;
        a.publish(&s);
        s.ip.badsum = 4;
        b.publish(&s);
        let mut sum = Stats::default();
        a.add_into(&mut sum);
        b.add_into(&mut sum);
        assert_eq!(sum.ip.badsum, 7);
        assert_eq!(sum.get("pfil.consumed"), Some(2));
        let mut txt = String::new();
        sum.write_netstat(&mut txt, false).unwrap();
        assert!(txt.contains("ip.badsum"), "{txt}");
    }
}
