#!/usr/bin/env python3
"""802.1Q exchanges with an mpstack node's VLAN interfaces over a TAP.

Usage: vlan.py IFACE. The node has 198.18.10.2 on VLAN 10 and 198.18.20.2 on VLAN 20
of the link. For each VLAN: a tagged ARP request must get a tagged ARP reply, then
tagged echo requests must get tagged echo replies with the data intact. A request on
VLAN 30, which the node does not have, must get no answer. Exits 1 on any failure.
"""
import sys

from scapy.all import ARP, ICMP, IP, Dot1Q, Ether, conf, get_if_hwaddr, srp1

conf.verb = 0
iface = sys.argv[1]
me = get_if_hwaddr(iface)
failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failed += 1


for vid in (10, 20):
    ours, theirs = "198.18.%d.1" % vid, "198.18.%d.2" % vid
    req = Ether(src=me, dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=vid) / ARP(
        op=1, hwsrc=me, psrc=ours, pdst=theirs
    )
    r = srp1(req, iface=iface, timeout=2, retry=2)
    ok = r is not None and Dot1Q in r and r[Dot1Q].vlan == vid and ARP in r and r[ARP].op == 2
    check(ok, "VLAN %d: tagged ARP reply for %s" % (vid, theirs))
    if not ok:
        continue
    mac = r[ARP].hwsrc
    for seq in range(3):
        data = bytes((seq * 7 + i) % 256 for i in range(200))
        echo = (
            Ether(src=me, dst=mac)
            / Dot1Q(vlan=vid)
            / IP(src=ours, dst=theirs)
            / ICMP(id=0x4d50, seq=seq)
            / data
        )
        r = srp1(echo, iface=iface, timeout=2, retry=2)
        ok = (
            r is not None
            and Dot1Q in r
            and r[Dot1Q].vlan == vid
            and ICMP in r
            and r[ICMP].type == 0
            and bytes(r[ICMP].payload) == data
        )
        check(ok, "VLAN %d: tagged echo reply %d from %s" % (vid, seq, theirs))

req = Ether(src=me, dst="ff:ff:ff:ff:ff:ff") / Dot1Q(vlan=30) / ARP(
    op=1, hwsrc=me, psrc="198.18.10.1", pdst="198.18.10.2"
)
r = srp1(req, iface=iface, timeout=1)
check(r is None, "VLAN 30: no answer")
sys.exit(1 if failed else 0)
