#!/usr/bin/env python3
"""The Linux end of a gif or GRE tunnel, for kernels built without ipip, sit,
ip6_tunnel and ip_gre.

Usage: tunnel_end.py KIND LOCAL REMOTE TUN [KEY]

KIND is gif or gre; LOCAL and REMOTE the outer addresses (both IPv4 or both IPv6);
TUN the name of the TUN device to make; KEY a GRE key. The Linux kernel's own
stack (ping, TCP) runs over the TUN device; this program does what the kernel's
tunnel driver would: a packet the kernel routes into TUN is wrapped (IP protocol 4
or 41 for gif, 47 and a GRE header for gre) and sent from LOCAL to REMOTE through a
raw socket, whose outer header the kernel writes; an encapsulated packet from
REMOTE is unwrapped and written into TUN, where the kernel receives it. The wire
format is the one Linux's ipip, sit, ip6tnl, gre and ip6gre use: no outer options,
no GRE checksum or sequence number.

Prints "ready" once the TUN device exists; runs until killed. Counts what it
carried on SIGTERM ("encapsulated N decapsulated M refused K").
"""
import fcntl
import ipaddress
import os
import select
import signal
import socket
import struct
import sys

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000

kind, local, remote, tun_name = sys.argv[1:5]
key = int(sys.argv[5]) if len(sys.argv) > 5 else None
local_ip = ipaddress.ip_address(local)
remote_ip = ipaddress.ip_address(remote)
v6 = local_ip.version == 6
family = socket.AF_INET6 if v6 else socket.AF_INET

tun = os.open("/dev/net/tun", os.O_RDWR)
fcntl.ioctl(tun, TUNSETIFF, struct.pack("16sH", tun_name.encode(), IFF_TUN | IFF_NO_PI))

protos = (4, 41) if kind == "gif" else (47,)
socks = {}
for p in protos:
    s = socket.socket(family, socket.SOCK_RAW, p)
    s.bind((local, 0))
    socks[p] = s

counts = {"encapsulated": 0, "decapsulated": 0, "refused": 0}


def done(*_):
    print(" ".join("%s %d" % kv for kv in counts.items()), flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, done)
signal.signal(signal.SIGINT, done)


def gre_header(inner_v6):
    flags = 0x2000 if key is not None else 0
    h = struct.pack("!HH", flags, 0x86DD if inner_v6 else 0x0800)
    if key is not None:
        h += struct.pack("!I", key)
    return h


def gre_strip(payload):
    """The inner packet of a GRE payload, or None if refused."""
    if len(payload) < 4:
        return None
    flags, proto = struct.unpack("!HH", payload[:4])
    if flags & 0x4807 or proto not in (0x0800, 0x86DD):
        return None
    at = 4
    if flags & 0x8000:
        at += 4
    got_key = None
    if flags & 0x2000:
        if len(payload) < at + 4:
            return None
        (got_key,) = struct.unpack("!I", payload[at:at + 4])
        at += 4
    if flags & 0x1000:
        at += 4
    if got_key != key or len(payload) < at:
        return None
    inner = payload[at:]
    want = 6 if proto == 0x86DD else 4
    return inner if inner and inner[0] >> 4 == want else None


print("ready", flush=True)
while True:
    ready, _, _ = select.select([tun] + list(socks.values()), [], [])
    for r in ready:
        if r == tun:
            pkt = os.read(tun, 65535)
            if not pkt:
                continue
            inner_v6 = pkt[0] >> 4 == 6
            if kind == "gif":
                s = socks[41 if inner_v6 else 4]
                out = pkt
            else:
                s = socks[47]
                out = gre_header(inner_v6) + pkt
            try:
                s.sendto(out, (remote, 0))
                counts["encapsulated"] += 1
            except OSError:
                counts["refused"] += 1
            continue
        data, addr = r.recvfrom(65535)
        if ipaddress.ip_address(addr[0]) != remote_ip:
            continue
        # IPv4 raw sockets hand over the outer header; IPv6 ones the payload only.
        payload = data if v6 else data[(data[0] & 0x0F) * 4:]
        proto = [p for p, s in socks.items() if s is r][0]
        if proto == 47:
            inner = gre_strip(payload)
        else:
            want = 6 if proto == 41 else 4
            inner = payload if payload and payload[0] >> 4 == want else None
        if inner is None:
            counts["refused"] += 1
            continue
        os.write(tun, inner)
        counts["decapsulated"] += 1
