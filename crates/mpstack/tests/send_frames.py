#!/usr/bin/env python3
"""Writes frames onto a link with an AF_PACKET socket (the Linux side of the
malformed-frame interop test). Input: a file of (u16 big-endian length, frame) records.
Paces itself so the TAP's queue towards mpstack does not overflow."""
import socket
import struct
import sys
import time

iface, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
off = sent = failed = 0
while off < len(data):
    (n,) = struct.unpack_from(">H", data, off)
    off += 2
    try:
        s.send(data[off:off + n])
        sent += 1
    except OSError as e:
        failed += 1
        print(f"frame {sent + failed}: {e}", file=sys.stderr)
    off += n
    if (sent + failed) % 200 == 0:
        time.sleep(0.002)
print(f"sent {sent} failed {failed}")
