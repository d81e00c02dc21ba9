#!/usr/bin/env python3
"""Robustness cases against an mpstack node, written with scapy.

Run inside the test's network namespace:
    robust.py IFACE NODE_MAC NODE6 LINUX6 NODE4 LINUX4

Each case sends crafted frames to the node over IFACE and checks what comes back
against what the RFCs ask for. One line per case, "PASS name" or "FAIL name: why";
exit status 1 if any case failed. Addresses are the test's own (2001:2::/48,
198.18.0.0/15).
"""

import sys
import time

from scapy.all import (  # noqa: F401  (scapy's layers register themselves)
    HBHOptUnknown,
    ICMP,
    IP,
    TCP,
    UDP,
    AsyncSniffer,
    Ether,
    ICMPv6DestUnreach,
    ICMPv6EchoReply,
    ICMPv6EchoRequest,
    ICMPv6ND_NA,
    ICMPv6ND_NS,
    ICMPv6NDOptSrcLLAddr,
    ICMPv6ParamProblem,
    ICMPv6TimeExceeded,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    Raw,
    conf,
    get_if_hwaddr,
    sendp,
)

conf.verb = 0

iface, node_mac, node6, linux6, node4, linux4 = sys.argv[1:7]
my_mac = get_if_hwaddr(iface)
failures = []
ident = [0x4d00]


def eth():
    return Ether(src=my_mac, dst=node_mac)


def exchange(frames, wait=1.0):
    """Sends frames, returns the IPv4/IPv6 packets the node sent in `wait` s."""
    sn = AsyncSniffer(
        iface=iface,
        lfilter=lambda p: p.haslayer(Ether) and p[Ether].src.lower() == node_mac.lower(),
        store=True,
    )
    sn.start()
    time.sleep(0.1)
    if not isinstance(frames, list):
        frames = [frames]
    for f in frames:
        sendp(f, iface=iface)
    time.sleep(wait)
    got = sn.stop() or []
    # Neighbour discovery of the node's own is not an answer.
    return [p for p in got if not p.haslayer(ICMPv6ND_NS) and not p.haslayer(ICMPv6ND_NA)
            and (p.haslayer(IPv6) or p.haslayer(IP))]


def case(name, ok, why=""):
    if ok:
        print(f"PASS {name}")
    else:
        print(f"FAIL {name}: {why}")
        failures.append(name)
    sys.stdout.flush()


def echo6(payload=b"x" * 16, seq=1):
    ident[0] += 1
    return ICMPv6EchoRequest(id=ident[0], seq=seq, data=payload)


def ip6():
    return IPv6(src=linux6, dst=node6)


def replies(got):
    return [p for p in got if p.haslayer(ICMPv6EchoReply)]


def param_problem(got, code, ptr):
    pp = [p[ICMPv6ParamProblem] for p in got if p.haslayer(ICMPv6ParamProblem)]
    if len(pp) != 1:
        return False, f"want one parameter problem, got {[p.summary() for p in got]}"
    if (pp[0].code, pp[0].ptr) != (code, ptr):
        return False, f"code/pointer {pp[0].code}/{pp[0].ptr}, want {code}/{ptr}"
    return True, ""


def check_pp(name, frame, code, ptr):
    ok, why = param_problem(exchange(frame), code, ptr)
    case(name, ok, why)


def check_silent(name, frame):
    got = exchange(frame)
    case(name, not got, f"expected silence, got {[p.summary() for p in got]}")


def check_echo(name, frames, n=1):
    got = exchange(frames)
    r = replies(got)
    case(name, len(r) == n, f"want {n} echo repl(ies), got {[p.summary() for p in got]}")


# --- IPv6 extension headers (RFC 8200 §4) -------------------------------------------

# Unknown option, action bits 10: Parameter Problem code 2 at the option type (40+2).
check_pp("hbh_unknown_option_discard_send", eth() / ip6() / IPv6ExtHdrHopByHop(options=[HBHOptUnknown(otype=0x9e, optdata=b"\x00" * 4)]) / echo6(), 2, 42)
# Action bits 11 to a unicast destination: the same.
check_pp("dst_unknown_option_discard_send_unicast", eth() / ip6() / IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0xde, optdata=b"\x00" * 4)]) / echo6(), 2, 42)
# Action bits 01: silently discarded.
check_silent("dst_unknown_option_discard", eth() / ip6() / IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0x5e, optdata=b"\x00" * 4)]) / echo6())
# Action bits 00: skipped, the echo answered.
check_echo("dst_unknown_option_skip", eth() / ip6() / IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0x1e, optdata=b"\x00" * 4)]) / echo6())
# An option running past its header: code 0 at its length byte (40+3).
check_pp("dst_option_overruns_header", eth() / ip6() / IPv6ExtHdrDestOpt(options=[HBHOptUnknown(otype=0x1e, optlen=9, optdata=b"\x00" * 4)]) / echo6(), 0, 43)
# Hop-by-hop not first: code 1 at the Next Header that names it (in the first, at 40).
check_pp("hbh_not_first", eth() / ip6() / IPv6ExtHdrDestOpt() / IPv6ExtHdrHopByHop() / echo6(), 1, 40)
# Unknown next header: code 1 at the IPv6 header's Next Header (6).
check_pp("unknown_next_header", eth() / IPv6(src=linux6, dst=node6, nh=253) / Raw(b"\x00" * 16), 1, 6)
# Routing header type 0 with segments left (RFC 5095): code 0 at the type (40+2).
check_pp("rthdr0_segments_left", eth() / ip6() / IPv6ExtHdrRouting(type=0, segleft=1, addresses=["2001:2::77"]) / echo6(), 0, 42)
# Type 0 with segments left 0: ignored, the echo answered.
check_echo("rthdr0_segments_left_0", eth() / ip6() / IPv6ExtHdrRouting(type=0, segleft=0, addresses=["2001:2::77"]) / echo6())
# A chain of 100 destination-options headers: refused (bounded work), no answer.
chain = ip6()
for _ in range(100):
    chain = chain / IPv6ExtHdrDestOpt()
check_silent("long_extension_chain", eth() / chain / echo6())
# A header whose length runs past the packet: dropped.
check_silent("truncated_extension_header", eth() / IPv6(src=linux6, dst=node6, nh=60, plen=8) / Raw(b"\x3a\x05" + b"\x00" * 6))
# Payload length beyond the frame: dropped.
check_silent("payload_length_too_long", eth() / IPv6(src=linux6, dst=node6, nh=58, plen=500) / echo6())
# A multicast source: dropped.
check_silent("multicast_source", eth() / IPv6(src="ff02::1", dst=node6) / echo6())

# --- checksums ------------------------------------------------------------------------

check_silent("icmp6_bad_checksum", eth() / ip6() / ICMPv6EchoRequest(id=7, seq=1, cksum=0x1234))
check_silent("udp6_bad_checksum", eth() / ip6() / UDP(sport=4000, dport=9999, chksum=0x1234) / Raw(b"hello"))
check_silent("udp6_zero_checksum", eth() / ip6() / UDP(sport=4000, dport=9999, chksum=0) / Raw(b"hello"))
check_silent("tcp6_bad_checksum", eth() / ip6() / TCP(sport=4000, dport=81, flags="S", chksum=0x1234))
# The right checksum: port unreachable, and a reset.
got = exchange(eth() / ip6() / UDP(sport=4000, dport=9999) / Raw(b"hello"))
case("udp6_closed_port_unreachable", any(p.haslayer(ICMPv6DestUnreach) and p[ICMPv6DestUnreach].code == 4 for p in got), str([p.summary() for p in got]))
got = exchange(eth() / ip6() / TCP(sport=4000, dport=81, flags="S", seq=1000))
rst = [p[TCP] for p in got if p.haslayer(TCP)]
case("tcp6_closed_port_reset", len(rst) == 1 and rst[0].flags.R and rst[0].ack == 1001, str([p.summary() for p in got]))

# --- neighbour discovery (RFC 4861 §7.1) ------------------------------------------------

def ns(hlim=255, opts=True, code=0):
    p = IPv6(src=linux6, dst=node6, hlim=hlim) / ICMPv6ND_NS(tgt=node6, code=code)
    if opts:
        p = p / ICMPv6NDOptSrcLLAddr(lladdr=my_mac)
    return eth() / p


def na_answers(got):
    return [p for p in got if p.haslayer(ICMPv6ND_NA)]


def exchange_nd(frame):
    sn = AsyncSniffer(iface=iface, lfilter=lambda p: p.haslayer(Ether) and p[Ether].src.lower() == node_mac.lower(), store=True)
    sn.start()
    time.sleep(0.1)
    sendp(frame, iface=iface)
    time.sleep(1.0)
    return sn.stop() or []


case("ns_answered", len(na_answers(exchange_nd(ns()))) == 1, "a valid solicitation gets one advertisement")
case("ns_hop_limit_254_ignored", not na_answers(exchange_nd(ns(hlim=254))), "RFC 4861 §7.1.1: hop limit must be 255")
case("ns_code_1_ignored", not na_answers(exchange_nd(ns(code=1))), "RFC 4861 §7.1.1: code must be 0")
bad_opt = eth() / IPv6(src=linux6, dst=node6, hlim=255) / ICMPv6ND_NS(tgt=node6) / Raw(b"\x01\x00" + b"\x00" * 6)
case("ns_zero_length_option_ignored", not na_answers(exchange_nd(bad_opt)), "an option of length 0 makes the message invalid")
dad_with_opt = eth() / IPv6(src="::", dst="ff02::1:ff00:2", hlim=255) / ICMPv6ND_NS(tgt=node6) / ICMPv6NDOptSrcLLAddr(lladdr=my_mac)
case("dad_probe_with_lladdr_ignored", not na_answers(exchange_nd(dad_with_opt)), "RFC 4861 §7.1.1: no SLLAO from ::")

# --- IPv6 fragments (RFC 8200 §4.5, RFC 5722, RFC 6946) ------------------------------------

def frags6(payload_len=3000, fid=None):
    """A fragment id and the bytes (ICMPv6 header and data) of one echo request."""
    ident[0] += 1
    fid = fid or ident[0]
    # The checksum needs the pseudo-header: let scapy build it on the whole packet.
    whole = IPv6(bytes(IPv6(src=linux6, dst=node6) / ICMPv6EchoRequest(id=ident[0], seq=1, data=b"f" * payload_len)))
    data = bytes(whole.payload)
    return fid, data


def frag(fid, off, more, chunk):
    return eth() / ip6() / IPv6ExtHdrFragment(id=fid, offset=off // 8, m=int(more), nh=58) / Raw(chunk)


fid, data = frags6(2000)
parts = [(0, True, data[:1232]), (1232, False, data[1232:])]
check_echo("frag6_in_order", [frag(fid, o, m, c) for o, m, c in parts])
fid, data = frags6(2000)
parts = [(0, True, data[:1232]), (1232, False, data[1232:])]
check_echo("frag6_out_of_order", [frag(fid, o, m, c) for o, m, c in reversed(parts)])
fid, data = frags6(2000)
parts = [(0, True, data[:1232]), (1232, False, data[1232:])]
check_echo("frag6_duplicate", [frag(fid, o, m, c) for o, m, c in parts + parts[:1]])
fid, data = frags6(2000)
# An overlap (RFC 5722): the whole datagram is dropped, no answer.
check_silent("frag6_overlap", [frag(fid, 0, True, data[:1232]), frag(fid, 1224, False, data[1224:])])
fid, data = frags6(64)
# Tiny fragments: 8 bytes each.
check_echo("frag6_tiny_pieces", [frag(fid, o, o + 8 < len(data), data[o:o + 8]) for o in range(0, len(data), 8)])
# An atomic fragment (RFC 6946): processed at once.
check_echo("frag6_atomic", eth() / ip6() / IPv6ExtHdrFragment(id=0x777, offset=0, m=0) / echo6())
# Never completed: no answer now (the time-out is 60 s; sim tests cover it).
fid, data = frags6(2000)
check_silent("frag6_never_completed", frag(fid, 0, True, data[:1232]))

# --- IPv4 fragments (RFC 791, RFC 1858) ------------------------------------------------------

def echo4_frags(n=2000):
    ident[0] += 1
    whole = IP(bytes(IP(src=linux4, dst=node4, id=ident[0]) / ICMP(id=ident[0], seq=1) / Raw(b"g" * n)))
    return whole


def frag4(whole, off, more, chunk):
    return eth() / IP(src=linux4, dst=node4, id=whole.id, proto=1, frag=off // 8, flags="MF" if more else 0) / Raw(chunk)


def replies4(got):
    return [p for p in got if p.haslayer(ICMP) and p[ICMP].type == 0]


w = echo4_frags()
b = bytes(w.payload)
got = exchange([frag4(w, 0, True, b[:1480]), frag4(w, 1480, False, b[1480:])][::-1])
case("frag4_out_of_order", len(replies4(got)) == 1, str([p.summary() for p in got]))
w = echo4_frags()
b = bytes(w.payload)
got = exchange([frag4(w, 0, True, b[:1480]), frag4(w, 1472, False, b[1472:])])
case("frag4_overlap", not replies4(got), str([p.summary() for p in got]))
w = echo4_frags(100)
b = bytes(w.payload)
# RFC 1858: a fragment at offset 8 bytes (offset field 1) is refused.
got = exchange([frag4(w, 0, True, b[:16]), frag4(w, 8, False, b[8:])])
case("frag4_offset_one_refused", not replies4(got), str([p.summary() for p in got]))
w = echo4_frags()
b = bytes(w.payload)
got = exchange(frag4(w, 0, True, b[:1480]))
case("frag4_never_completed", not replies4(got), str([p.summary() for p in got]))

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
