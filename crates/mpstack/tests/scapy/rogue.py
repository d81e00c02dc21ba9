#!/usr/bin/env python3
"""A hostile host on an mpstack bridge's member, over a TAP.

Usage: rogue.py IFACE tc SECONDS | rogue.py IFACE flood COUNT

tc: claims to be the spanning tree's root (priority 0) in 100 configuration BPDUs a
second, the topology change flag flipped in each, for SECONDS; meanwhile counts the
unicast IPv4 frames between two other hosts (198.18.0.1 and 198.18.0.2) that reach
this port. flood: sends COUNT frames from as many new source addresses, counting the
same. Prints "leaked N" and exits 1 if N > 0.
"""
import sys
import time

from scapy.all import IP, LLC, STP, AsyncSniffer, Dot3, Ether, conf, get_if_hwaddr, sendp

conf.verb = 0
iface, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
me = get_if_hwaddr(iface)
hosts = {"198.18.0.1", "198.18.0.2"}


def theirs(p):
    return (
        Ether in p
        and not (int(p[Ether].dst.split(":")[0], 16) & 1)
        and IP in p
        and {p[IP].src, p[IP].dst} == hosts
    )


sniffer = AsyncSniffer(iface=iface, lfilter=theirs, store=True)
sniffer.start()
time.sleep(0.5)
if mode == "tc":
    bpdus = [
        Dot3(dst="01:80:c2:00:00:00", src=me)
        / LLC(dsap=0x42, ssap=0x42, ctrl=3)
        / STP(
            bpduflags=1 if k % 2 == 0 else 0,
            rootid=0,
            rootmac=me,
            pathcost=0,
            bridgeid=0,
            bridgemac=me,
            portid=0x8001,
            age=0,
            maxage=6,
            hellotime=1,
            fwddelay=4,
        )
        for k in range(2)
    ]
    bpdus = [bytes(b) + bytes(max(0, 60 - len(bytes(b)))) for b in bpdus]
    out = conf.L2socket(iface=iface)
    end = time.time() + n
    k = 0
    while time.time() < end:
        out.send(bpdus[k % 2])
        k += 1
        time.sleep(0.01)
    out.close()
    print("sent %d BPDUs" % k)
else:
    frames = [
        Ether(dst="02:77:00:00:00:01", src="02:66:00:%02x:%02x:%02x" % (k >> 16, (k >> 8) & 255, k & 255))
        / IP(src="198.18.0.66", dst="198.18.0.77")
        for k in range(n)
    ]
    sendp(frames, iface=iface)
    time.sleep(2)
    print("sent %d frames" % n)
time.sleep(0.5)
got = sniffer.stop()
print("leaked %d" % len(got))
sys.exit(1 if got else 0)
